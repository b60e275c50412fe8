// The Pegasus-X family ("pegasus_x"): a staggered block-local encoder with learned global tokens
// (encoder.hpp) and a pre-LayerNorm decoder (decoder.hpp), as models/family.hpp describes a
// family. Its SentencePiece tokenizer numbers pieces from 103 (PegasusTokenizer's specials first).
#pragma once
#include <optional>
#include <string>

#include "../family.hpp"
#include "../bart/conventions.hpp"
#include "decoder.hpp"
#include "encoder.hpp"

namespace locost::models {

struct pegasus_x_family : family_base<pegasus_x_family, pegasus_x_config>, activation_stacks<pegasus_x_encoder, pegasus_x_decoder> {
    static constexpr const char* name = "pegasus_x";
    // What demo-checkpoint writes (its --help lists it).
    static constexpr const char* demo_shapes =
        "base: d_model 768, 12+12 layers, 12 heads, d_ff 3072, blocks of 512, 128 global tokens, vocab 96103 (pegasus-x-base's shape); tiny: blocks of 16, 4 global tokens, vocabulary 16103 (its tokenizer_config.json numbers pieces from 103, as PegasusTokenizer does)";
    // PegasusTokenizer's numbering: the SentencePiece pieces start at id 103 (text/sentencepiece.hpp).
    static constexpr int sentencepiece_id_offset = 103;
    static text::tokenizer_conventions tokenizer_conventions() { return {sentencepiece_id_offset}; }

    static described describe(const config& c) {
        return describe_bart_style(c, c,
                                   {{"block_size", c.block_size},
                                    {"num_global_tokens", c.num_global_tokens},
                                    {"stagger_local_blocks", c.stagger_local_blocks},
                                    {"max_position_embeddings", c.max_position_embeddings},
                                    {"scale_embedding", c.scale_embedding}},
                                   {.forced_eos = true});
    }

    static encoder_memory encoder_working_set(const config& c, const encoder_options&, const encoder_request& r) {
        const index_t H = c.d_model;
        const index_t attention =
            layers::global_local_attention<float, cpu>::scratch_elements(H, H, c.num_global_tokens, r.batch, r.length);
        const index_t ff_row = layers::biased_feed_forward<float, cpu, activation::gelu_erf, true>::scratch_per_row(H, c.d_ff);
        encoder_memory m = stack_memory(H, r, attention, ff_row);
        m.working.push_back(
            {"global-token states", static_cast<double>(r.batch * c.num_global_tokens * H) * static_cast<double>(r.element), ""});
        // Both stacks' sinusoid frequencies, float32 whatever the scalar.
        m.tables.push_back(
            {"position frequencies", 2.0 * static_cast<double>(layers::sinusoidal_positions<float, cpu>::table_elements(H)) * 4.0, ""});
        return m;
    }

    // google/pegasus-x-base's shape (12 + 12 layers, 128 global tokens, blocks of 512, vocab 96103),
    // or tiny (the references': blocks of 16, 4 global tokens), with the vocabulary of its
    // SentencePiece model after Pegasus's 103 special ids. Initialised as transformers'
    // PegasusXPreTrainedModel._init_weights (init_std 0.02).
    static demo_plan demo(const std::string& size, index_t tiny_vocab, const std::string&) {
        io::json j = {{"vocab_size", 96103},
                      {"d_model", 768},
                      {"encoder_layers", 12},
                      {"decoder_layers", 12},
                      {"encoder_attention_heads", 12},
                      {"decoder_attention_heads", 12},
                      {"encoder_ffn_dim", 3072},
                      {"decoder_ffn_dim", 3072},
                      {"block_size", 512},
                      {"num_global_tokens", 128}};
        if (size == "tiny")
            j = {{"vocab_size", tiny_vocab},
                 {"d_model", 64},
                 {"encoder_layers", 2},
                 {"decoder_layers", 2},
                 {"encoder_attention_heads", 4},
                 {"decoder_attention_heads", 4},
                 {"encoder_ffn_dim", 128},
                 {"decoder_ffn_dim", 128},
                 {"block_size", 16},
                 {"num_global_tokens", 4}};
        else if (size != "base") bad_demo_size(size);
        j.update({{"activation_function", "gelu"},
                  {"max_position_embeddings", 16384},
                  {"stagger_local_blocks", true},
                  {"scale_embedding", true},
                  {"init_std", 0.02},
                  {"dropout", 0.0},
                  {"attention_dropout", 0.0},
                  {"activation_dropout", 0.0},
                  {"tie_word_embeddings", true},
                  {"is_encoder_decoder", true},
                  {"use_cache", true},
                  {"pad_token_id", 0},
                  {"eos_token_id", 1},
                  {"decoder_start_token_id", 0},
                  {"forced_eos_token_id", 1},
                  {"architectures", {"PegasusXForConditionalGeneration"}},
                  {"model_type", "pegasus_x"},
                  {"locost_demo_checkpoint", demo_label}});
        demo_plan p;
        p.label = "Pegasus-X";
        p.config = j;
        p.generation = {{"decoder_start_token_id", 0}, {"eos_token_id", 1}, {"forced_eos_token_id", 1}, {"pad_token_id", 0}};
        p.tokenizer_config = {{"tokenizer_class", "PegasusTokenizer"},
                              {"offset", sentencepiece_id_offset},
                              {"pad_token", "<pad>"},
                              {"eos_token", "</s>"},
                              {"unk_token", "<unk>"},
                              {"model_max_length", 16384}};
        p.sentencepiece_id_offset = sentencepiece_id_offset;
        p.init = [](const layers::param_record& r) { return bart_style_init(r, std::nullopt); };
        return p;
    }
};

}  // namespace locost::models
