// The BART family ("bart"): BART's encoder and decoder (encoder.hpp, decoder.hpp), as
// models/family.hpp describes a family. Its tokenizer is byte-level BPE (vocab.json + merges.txt).
#pragma once
#include <string>

#include "../family.hpp"
#include "conventions.hpp"
#include "decoder.hpp"
#include "encoder.hpp"

namespace locost::models {

namespace bart_conventions {

// Scratch per row of an encoder's post-norm feed-forward.
inline index_t ff_scratch_per_row(const model_config& c) {
    return layers::biased_feed_forward<float, cpu, activation::gelu_erf>::scratch_per_row(c.d_model, c.d_ff);
}

// facebook/bart-base's shape (6 + 6 layers, vocab 50265), or tiny (the references').
inline io::json demo_config(const std::string& size, index_t tiny_vocab) {
    io::json j = {{"vocab_size", 50265},           {"d_model", 768},
                  {"encoder_layers", 6},           {"decoder_layers", 6},
                  {"encoder_attention_heads", 12}, {"decoder_attention_heads", 12},
                  {"encoder_ffn_dim", 3072},       {"decoder_ffn_dim", 3072}};
    if (size == "tiny")
        j = {{"vocab_size", tiny_vocab},     {"d_model", 64},
             {"encoder_layers", 2},          {"decoder_layers", 2},
             {"encoder_attention_heads", 4}, {"decoder_attention_heads", 4},
             {"encoder_ffn_dim", 128},       {"decoder_ffn_dim", 128}};
    else if (size != "base") bad_demo_size(size);
    j.update({{"activation_function", "gelu"},
              {"max_position_embeddings", 1024},
              {"scale_embedding", false},
              {"init_std", 0.02},
              {"dropout", 0.0},
              {"attention_dropout", 0.0},
              {"activation_dropout", 0.0},
              {"tie_word_embeddings", true},
              {"is_encoder_decoder", true},
              {"use_cache", true},
              {"pad_token_id", 1},
              {"bos_token_id", 0},
              {"eos_token_id", 2},
              {"decoder_start_token_id", 2},
              {"forced_eos_token_id", 2},
              {"architectures", {"BartForConditionalGeneration"}},
              {"model_type", "bart"},
              {"locost_demo_checkpoint", demo_label}});
    return j;
}

}  // namespace bart_conventions

struct bart_family : family_base<bart_family, bart_config>, activation_stacks<bart_encoder, bart_decoder> {
    static constexpr const char* name = "bart";
    static constexpr bool all_to_all_encoder = true;  // full self-attention (within its 1024 positions)
    // What demo-checkpoint writes (its --help lists it).
    static constexpr const char* demo_shapes =
        "base: d_model 768, 6+6 layers, 12 heads, d_ff 3072, GELU, vocab 50265, 1024 positions (bart-base)";

    static described describe(const config& c) {
        return describe_bart_style(c, c, {{"max_position_embeddings", c.max_position_embeddings}, {"scale_embedding", c.scale_embedding}},
                                   {.bos = true, .forced_bos = true, .forced_eos = true});
    }

    static encoder_memory encoder_working_set(const config& c, const encoder_options&, const encoder_request& r) {
        return stack_memory(c.d_model, r,
                            layers::normed_encoder_attention<float, cpu, layers::layer_norm_after>::scratch_elements(c.d_model, c.d_model,
                                                                                                                     r.batch, r.length),
                            bart_conventions::ff_scratch_per_row(c));
    }

    static demo_plan demo(const std::string& size, index_t tiny_vocab, const std::string&) {
        demo_plan p;
        p.label = "BART";
        p.config = bart_conventions::demo_config(size, tiny_vocab);
        // As facebook/bart-large-cnn's (the summarization checkpoint): <s> forced first, </s> last.
        p.generation = {{"bos_token_id", 0},        {"decoder_start_token_id", 2}, {"eos_token_id", 2},
                        {"forced_bos_token_id", 0}, {"forced_eos_token_id", 2},    {"pad_token_id", 1}};
        p.byte_bpe = true;
        p.init = [](const layers::param_record& r) { return bart_style_init(r, index_t{1}); };
        return p;
    }
};

}  // namespace locost::models
