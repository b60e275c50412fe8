// The fields of config.json that every encoder-decoder family shares (models/config.hpp says how
// they are read), as a plain struct: on its own so that the public API's light headers
// (locost/api.hpp) can say what a loaded model is without the parsers.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "../core/index.hpp"

namespace locost::models {

struct model_config {
    std::string model_type;
    std::string source;  // the config.json path (or what the caller named), for messages

    index_t vocab_size = 32128;
    index_t d_model = 512;
    index_t d_kv = 64;
    index_t d_ff = 2048;
    index_t num_layers = 6;
    index_t num_decoder_layers = 6;  // absent: num_layers
    index_t num_heads = 8;
    // The decoder's attention heads, their width and its feed-forward width (T5Config has one of
    // each for both stacks; BartConfig names the decoder's apart).
    index_t decoder_heads = 8;
    index_t decoder_d_kv = 64;
    index_t decoder_d_ff = 2048;

    double dropout_rate = 0.1;
    double layer_norm_epsilon = 1e-6;

    // The feed-forward's activation: relu, gelu_new, gelu or silu (each family derives it from its
    // own field: T5's feed_forward_proj, BART's activation_function).
    std::string dense_act_fn = "relu";

    bool tie_word_embeddings = true;
    bool scale_decoder_outputs = true;  // absent: tie_word_embeddings
    bool is_encoder_decoder = true;
    bool use_cache = true;

    index_t pad_token_id = 0;
    index_t eos_token_id = 1;                  // the first of eos_token_ids
    std::vector<index_t> eos_token_ids = {1};  // config.json may give an integer or a list
    index_t decoder_start_token_id = 0;
    std::optional<index_t> bos_token_id;
};

}  // namespace locost::models
