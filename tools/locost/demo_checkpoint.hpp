// `locost demo-checkpoint`: a checkpoint of a model family with seeded random, UNTRAINED weights,
// initialised the way the family's original code initialises a fresh model so that activations
// stay in a realistic range.
//
// LOCOST (flbbb/locost-summarization: LOCOSTPreTrainedModel._init_weights,
// SSKernelDiag.__init__, ssm_init.dplr "diag-lin"; PyTorch defaults for everything those leave alone):
//   RMSNorm weights 1;  shared embedding N(0, 1);
//   feed-forward wi/wi_0/wi_1 N(0, d_model^-1/2), wo N(0, d_ff^-1/2);
//   other Linear layers (S4D q/k/output projections, decoder attention, relative bias via
//   nn.Embedding N(0,1)) PyTorch's default U(-1/sqrt(fan_in), +1/sqrt(fan_in)) for weight and bias;
//   S4D: log_dt U[log 1e-3, log 1e-1], A = -0.5 + i·pi·n (inv_A_real = log 0.5), B = 1,
//        C complex normal (unit variance), D N(0, 1).
// T5 (transformers T5PreTrainedModel._init_weights, factor 1): norms 1; shared and an untied
//   lm_head N(0, 1); wi/wi_0/wi_1 N(0, d_model^-1/2), wo N(0, d_ff^-1/2); attention q
//   N(0, (d_model·d_kv)^-1/2), k and v N(0, d_model^-1/2), o N(0, (heads·d_kv)^-1/2), relative
//   bias N(0, d_model^-1/2).
// BART (transformers BartPreTrainedModel._init_weights, init_std 0.02): Linear weights and every
//   embedding (shared, learned positions) N(0, 0.02), biases 0, the pad row of shared 0,
//   LayerNorms weight 1 bias 0, final_logits_bias 0.
// Pegasus-X (transformers PegasusXPreTrainedModel._init_weights, init_std 0.02): Linear weights
//   and every embedding (shared, embed_global) N(0, 0.02), biases 0, LayerNorms weight 1 bias 0.
// The random numbers come from our own splitmix64 + Box–Muller so a seed gives the same
// checkpoint on every platform.
#pragma once
#include <locost/locost.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

namespace locost::cli {

class demo_rng {
public:
    explicit demo_rng(std::uint64_t seed) : s_(seed) {}
    std::uint64_t next() {
        std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
    double normal() {
        if (have_spare_) { have_spare_ = false; return spare_; }
        double u1 = uniform(), u2 = uniform();
        if (u1 < 1e-300) u1 = 1e-300;
        const double r = std::sqrt(-2.0 * std::log(u1)), t = 6.283185307179586 * u2;
        spare_ = r * std::sin(t);
        have_spare_ = true;
        return r * std::cos(t);
    }

private:
    std::uint64_t s_;
    double spare_ = 0;
    bool have_spare_ = false;
};

// What demo-checkpoint writes: the config.json, the tensor list and each tensor's initialisation.
struct demo_plan {
    nlohmann::json config;
    nlohmann::json generation;  // generation_config.json, when the family's checkpoints carry one
    nlohmann::json tokenizer_config;  // tokenizer_config.json, when the family's numbering needs one
    std::vector<io::parameter_spec> parameters;
    std::function<void(const io::parameter_spec&, demo_rng&, float*)> init;
};

namespace demo_detail {

inline bool ends_with(const std::string& n, const char* s) {
    const std::string t(s);
    return n.size() >= t.size() && n.compare(n.size() - t.size(), t.size(), t) == 0;
}
inline void fill_normal(float* x, index_t n, double sd, demo_rng& rng) {
    for (index_t i = 0; i < n; ++i) x[i] = static_cast<float>(sd * rng.normal());
}
inline void fill_uniform(float* x, index_t n, double lo, double hi, demo_rng& rng) {
    for (index_t i = 0; i < n; ++i) x[i] = static_cast<float>(lo + (hi - lo) * rng.uniform());
}
[[noreturn]] inline void bad_config(const std::string& name) {
    throw error("cli.bad_value", "demo-checkpoint: option '--config' expects 'base' or 'tiny', got '" + name + "'");
}

} // namespace demo_detail

// LOCOST: base is configs/pretraining/locost_default.yaml; tiny the shared reference's dimensions.
inline demo_plan demo_locost(const std::string& name, index_t tiny_vocab) {
    models::locost_config c;
    c.model_type = "locost";
    c.vocab_size = 32100, c.d_model = 768, c.d_state = 512, c.d_kv = 64, c.d_ff = 2048;
    c.num_layers = c.num_decoder_layers = 12, c.num_heads = 12, c.num_ssm_heads = 1;
    c.feed_forward_proj = "gated-gelu", c.is_gated_act = true;
    if (name == "tiny") {
        c.vocab_size = tiny_vocab, c.d_model = 64, c.d_state = 16, c.d_kv = 16, c.d_ff = 128;
        c.num_layers = c.num_decoder_layers = 2, c.num_heads = 4;
    } else if (name != "base") {
        demo_detail::bad_config(name);
    }
    demo_plan p;
    p.config = {
        {"vocab_size", c.vocab_size}, {"d_model", c.d_model}, {"d_state", c.d_state}, {"d_kv", c.d_kv},
        {"d_ff", c.d_ff}, {"num_ssm_heads", c.num_ssm_heads}, {"num_layers", c.num_layers},
        {"num_decoder_layers", c.num_decoder_layers}, {"num_heads", c.num_heads},
        {"local_radius", 127}, {"global_block_size", 16},
        {"relative_attention_num_buckets", 32}, {"relative_attention_max_distance", 128}, {"dropout_rate", 0.0},
        {"layer_norm_epsilon", 1e-6}, {"initializer_factor", 1.0},
        {"feed_forward_proj", "gated-gelu"}, {"encoder_attention_type", "local"},
        {"use_cache", true}, {"use_fast_fft_conv", false}, {"bidirectional", true},
        {"gating", true}, {"tie_word_embeddings", true}, {"is_encoder_decoder", true},
        {"pad_token_id", 0}, {"eos_token_id", 1}, {"decoder_start_token_id", 0},
        {"architectures", {"LOCOSTForConditionalGeneration"}}, {"model_type", "locost"},
        {"locost_demo_checkpoint", "UNTRAINED: seeded random weights written by 'locost demo-checkpoint'; outputs are not meaningful"},
    };
    p.parameters = models::locost_parameters(c);
    const double H = static_cast<double>(c.d_model), F = static_cast<double>(c.d_ff);
    p.init = [H, F](const io::parameter_spec& spec, demo_rng& rng, float* x) {
        using namespace demo_detail;
        const auto& n = spec.name;
        const index_t count = spec.shape.numel();
        if (ends_with(n, "norm.weight")) {
            std::fill_n(x, count, 1.0f);
        } else if (n == "shared.weight" || ends_with(n, "relative_attention_bias.weight") || ends_with(n, "ssm_layer.D")) {
            fill_normal(x, count, 1.0, rng);
        } else if (ends_with(n, "wi.weight") || ends_with(n, "wi_0.weight") || ends_with(n, "wi_1.weight")) {
            fill_normal(x, count, std::pow(H, -0.5), rng);
        } else if (ends_with(n, "wo.weight")) {
            fill_normal(x, count, std::pow(F, -0.5), rng);
        } else if (ends_with(n, "kernel.log_dt")) {
            fill_uniform(x, count, std::log(1e-3), std::log(1e-1), rng);
        } else if (ends_with(n, "kernel.inv_A_real")) {
            std::fill_n(x, count, static_cast<float>(std::log(0.5)));
        } else if (ends_with(n, "kernel.A_imag")) {
            const index_t modes = spec.shape[1];
            for (index_t i = 0; i < count; ++i) x[i] = static_cast<float>(3.141592653589793 * static_cast<double>(i % modes));
        } else if (ends_with(n, "kernel.B")) {
            for (index_t i = 0; i < count; ++i) x[i] = (i % 2 == 0) ? 1.0f : 0.0f;
        } else if (ends_with(n, "kernel.C")) {
            fill_normal(x, count, std::sqrt(0.5), rng);  // complex normal: real and imaginary parts each N(0, 1/2)
        } else {
            // PyTorch nn.Linear default (kaiming_uniform with a = sqrt(5)) for weights and biases alike.
            const double fan_in = ends_with(n, ".bias") ? H : static_cast<double>(spec.shape.back());
            const double bound = 1.0 / std::sqrt(fan_in);
            fill_uniform(x, count, -bound, bound, rng);
        }
    };
    return p;
}

// T5: base is google/t5-v1_1-base (gated-gelu, untied head); tiny the HF references' dimensions.
inline demo_plan demo_t5(const std::string& name, index_t tiny_vocab) {
    models::t5_config c;
    c.model_type = "t5";
    c.vocab_size = 32128, c.d_model = 768, c.d_kv = 64, c.d_ff = 2048, c.num_layers = c.num_decoder_layers = 12, c.num_heads = 12;
    c.feed_forward_proj = "gated-gelu", c.is_gated_act = true, c.tie_word_embeddings = false;
    if (name == "tiny") {
        c.vocab_size = tiny_vocab, c.d_model = 64, c.d_kv = 16, c.d_ff = 128, c.num_layers = c.num_decoder_layers = 2, c.num_heads = 4;
    } else if (name != "base") {
        demo_detail::bad_config(name);
    }
    demo_plan p;
    p.config = {
        {"vocab_size", c.vocab_size}, {"d_model", c.d_model}, {"d_kv", c.d_kv}, {"d_ff", c.d_ff},
        {"num_layers", c.num_layers}, {"num_decoder_layers", c.num_decoder_layers}, {"num_heads", c.num_heads},
        {"relative_attention_num_buckets", 32}, {"relative_attention_max_distance", 128}, {"dropout_rate", 0.0},
        {"layer_norm_epsilon", 1e-6}, {"initializer_factor", 1.0}, {"feed_forward_proj", "gated-gelu"},
        {"tie_word_embeddings", false}, {"is_encoder_decoder", true}, {"use_cache", true},
        {"pad_token_id", 0}, {"eos_token_id", 1}, {"decoder_start_token_id", 0},
        {"architectures", {"T5ForConditionalGeneration"}}, {"model_type", "t5"},
        {"locost_demo_checkpoint", "UNTRAINED: seeded random weights written by 'locost demo-checkpoint'; outputs are not meaningful"},
    };
    p.parameters = models::t5_parameters(c);
    const double H = static_cast<double>(c.d_model), F = static_cast<double>(c.d_ff), kv = static_cast<double>(c.d_kv),
                 heads = static_cast<double>(c.num_heads);
    p.init = [H, F, kv, heads](const io::parameter_spec& spec, demo_rng& rng, float* x) {
        using namespace demo_detail;
        const auto& n = spec.name;
        const index_t count = spec.shape.numel();
        double sd = 1.0;  // shared, lm_head
        if (ends_with(n, "norm.weight")) {
            std::fill_n(x, count, 1.0f);
            return;
        }
        if (ends_with(n, "wi.weight") || ends_with(n, "wi_0.weight") || ends_with(n, "wi_1.weight")) sd = std::pow(H, -0.5);
        else if (ends_with(n, "wo.weight")) sd = std::pow(F, -0.5);
        else if (ends_with(n, ".q.weight")) sd = std::pow(H * kv, -0.5);
        else if (ends_with(n, ".k.weight") || ends_with(n, ".v.weight") || ends_with(n, "relative_attention_bias.weight")) sd = std::pow(H, -0.5);
        else if (ends_with(n, ".o.weight")) sd = std::pow(heads * kv, -0.5);
        fill_normal(x, count, sd, rng);
    };
    return p;
}

// BART: base is facebook/bart-base's shape (6+6 layers, vocab 50265); tiny the HF references'.
inline demo_plan demo_bart(const std::string& name, index_t tiny_vocab) {
    index_t V = 50265, H = 768, layers = 6, heads = 12, F = 3072, positions = 1024;
    if (name == "tiny") {
        V = tiny_vocab, H = 64, layers = 2, heads = 4, F = 128, positions = 1024;
    } else if (name != "base") {
        demo_detail::bad_config(name);
    }
    demo_plan p;
    p.config = {
        {"vocab_size", V}, {"d_model", H}, {"encoder_layers", layers}, {"decoder_layers", layers},
        {"encoder_attention_heads", heads}, {"decoder_attention_heads", heads}, {"encoder_ffn_dim", F},
        {"decoder_ffn_dim", F}, {"activation_function", "gelu"}, {"max_position_embeddings", positions},
        {"scale_embedding", false}, {"init_std", 0.02}, {"dropout", 0.0}, {"attention_dropout", 0.0},
        {"activation_dropout", 0.0}, {"tie_word_embeddings", true}, {"is_encoder_decoder", true}, {"use_cache", true},
        {"pad_token_id", 1}, {"bos_token_id", 0}, {"eos_token_id", 2}, {"decoder_start_token_id", 2},
        {"forced_eos_token_id", 2}, {"architectures", {"BartForConditionalGeneration"}}, {"model_type", "bart"},
        {"locost_demo_checkpoint", "UNTRAINED: seeded random weights written by 'locost demo-checkpoint'; outputs are not meaningful"},
    };
    // As facebook/bart-large-cnn's (the summarization checkpoint): <s> forced first, </s> last.
    p.generation = {{"bos_token_id", 0}, {"decoder_start_token_id", 2}, {"eos_token_id", 2}, {"forced_bos_token_id", 0},
                    {"forced_eos_token_id", 2}, {"pad_token_id", 1}};
    p.parameters = models::bart_parameters(models::parse_bart_config(p.config, "demo-checkpoint"));
    p.parameters.front().optional = false;  // write final_logits_bias as save_pretrained does
    p.init = [H](const io::parameter_spec& spec, demo_rng& rng, float* x) {
        using namespace demo_detail;
        const auto& n = spec.name;
        const index_t count = spec.shape.numel();
        const bool norm = n.find("layer_norm.") != std::string::npos || n.find("layernorm_embedding.") != std::string::npos;
        if (norm && ends_with(n, ".weight")) std::fill_n(x, count, 1.0f);
        else if (norm || ends_with(n, ".bias") || n == models::bart_names::final_logits_bias) std::fill_n(x, count, 0.0f);
        else fill_normal(x, count, 0.02, rng);
        if (n == models::bart_names::shared) std::fill_n(x + 1 * H, H, 0.0f);  // padding_idx 1
    };
    return p;
}

// LongT5: base is google/long-t5-tglobal-base (or its local-attention twin, long-t5-local-base):
// T5 v1.1's shapes with local_radius 127, global_block_size 16; tiny the HF references'. The
// initialisation is T5's (LongT5PreTrainedModel._init_weights), the global bias as the local one.
inline demo_plan demo_longt5(const std::string& name, index_t tiny_vocab, const std::string& attention) {
    if (attention != "local" && attention != "transient-global")
        throw error("cli.bad_value", "demo-checkpoint: option '--encoder-attention-type' expects 'local' or 'transient-global', got '" +
                                         attention + "'");
    demo_plan p = demo_t5(name, tiny_vocab);
    p.config["model_type"] = "longt5";
    p.config["architectures"] = {"LongT5ForConditionalGeneration"};
    p.config["encoder_attention_type"] = attention;
    p.config["local_radius"] = name == "tiny" ? 7 : 127;
    p.config["global_block_size"] = name == "tiny" ? 4 : 16;
    p.parameters = models::longt5_parameters(models::parse_longt5_config(p.config, "demo-checkpoint"));
    return p;
}

// LED: base is allenai/led-base-16384's shape (BART-base with a Longformer encoder: windows of
// 1024, 16384 encoder positions); tiny the HF references' (window 16). Initialised as BART
// (LEDPreTrainedModel._init_weights, init_std 0.02).
inline demo_plan demo_led(const std::string& name, index_t tiny_vocab) {
    demo_plan p = demo_bart(name, tiny_vocab);
    const index_t layers = p.config["encoder_layers"].get<index_t>(), window = name == "tiny" ? 16 : 1024;
    p.config.erase("max_position_embeddings");
    p.config.erase("scale_embedding");
    p.config["max_encoder_position_embeddings"] = 16384;
    p.config["max_decoder_position_embeddings"] = 1024;
    p.config["attention_window"] = std::vector<index_t>(static_cast<std::size_t>(layers), window);
    p.config["architectures"] = {"LEDForConditionalGeneration"};
    p.config["model_type"] = "led";
    p.generation = {{"bos_token_id", 0}, {"decoder_start_token_id", 2}, {"eos_token_id", 2}, {"pad_token_id", 1}};
    const auto c = models::parse_led_config(p.config, "demo-checkpoint");
    p.parameters = models::led_parameters(c);
    p.parameters.front().optional = false;  // write final_logits_bias as save_pretrained does
    const std::string shared = models::bart_names::shared_of(c.weights_root);
    const index_t H = c.d_model;
    p.init = [H, shared](const io::parameter_spec& spec, demo_rng& rng, float* x) {
        using namespace demo_detail;
        const auto& n = spec.name;
        const index_t count = spec.shape.numel();
        const bool norm = n.find("layer_norm.") != std::string::npos || n.find("layernorm_embedding.") != std::string::npos;
        if (norm && ends_with(n, ".weight")) std::fill_n(x, count, 1.0f);
        else if (norm || ends_with(n, ".bias") || n == models::bart_names::final_logits_bias) std::fill_n(x, count, 0.0f);
        else fill_normal(x, count, 0.02, rng);
        if (n == shared) std::fill_n(x + 1 * H, H, 0.0f);  // padding_idx 1
    };
    return p;
}

// Pegasus-X: base is google/pegasus-x-base's shape (12+12 layers, 128 global tokens, blocks of
// 512, vocab 96103); tiny the HF references' (blocks of 16, 4 global tokens), with the vocabulary
// of its SentencePiece model after Pegasus's offset of 103 special ids.
inline constexpr int pegasus_id_offset = 103;
inline demo_plan demo_pegasus_x(const std::string& name, index_t tiny_vocab) {
    index_t V = 96103, H = 768, layers = 12, heads = 12, F = 3072, block = 512, globals = 128;
    if (name == "tiny") {
        V = tiny_vocab, H = 64, layers = 2, heads = 4, F = 128, block = 16, globals = 4;
    } else if (name != "base") {
        demo_detail::bad_config(name);
    }
    demo_plan p;
    p.config = {
        {"vocab_size", V}, {"d_model", H}, {"encoder_layers", layers}, {"decoder_layers", layers},
        {"encoder_attention_heads", heads}, {"decoder_attention_heads", heads}, {"encoder_ffn_dim", F},
        {"decoder_ffn_dim", F}, {"activation_function", "gelu"}, {"max_position_embeddings", 16384},
        {"block_size", block}, {"num_global_tokens", globals}, {"stagger_local_blocks", true},
        {"scale_embedding", true}, {"init_std", 0.02}, {"dropout", 0.0}, {"attention_dropout", 0.0},
        {"activation_dropout", 0.0}, {"tie_word_embeddings", true}, {"is_encoder_decoder", true}, {"use_cache", true},
        {"pad_token_id", 0}, {"eos_token_id", 1}, {"decoder_start_token_id", 0}, {"forced_eos_token_id", 1},
        {"architectures", {"PegasusXForConditionalGeneration"}}, {"model_type", "pegasus_x"},
        {"locost_demo_checkpoint", "UNTRAINED: seeded random weights written by 'locost demo-checkpoint'; outputs are not meaningful"},
    };
    p.generation = {{"decoder_start_token_id", 0}, {"eos_token_id", 1}, {"forced_eos_token_id", 1}, {"pad_token_id", 0}};
    // PegasusTokenizer's numbering: the SentencePiece pieces start at id 103 (text/sentencepiece.hpp).
    p.tokenizer_config = {{"tokenizer_class", "PegasusTokenizer"}, {"offset", pegasus_id_offset}, {"pad_token", "<pad>"},
                          {"eos_token", "</s>"}, {"unk_token", "<unk>"}, {"model_max_length", 16384}};
    p.parameters = models::pegasus_x_parameters(models::parse_pegasus_x_config(p.config, "demo-checkpoint"));
    p.init = [](const io::parameter_spec& spec, demo_rng& rng, float* x) {
        using namespace demo_detail;
        const auto& n = spec.name;
        const index_t count = spec.shape.numel();
        const bool norm = n.find("layer_norm.") != std::string::npos;
        if (norm && ends_with(n, ".weight")) std::fill_n(x, count, 1.0f);
        else if (norm || ends_with(n, ".bias")) std::fill_n(x, count, 0.0f);
        else fill_normal(x, count, 0.02, rng);
    };
    return p;
}

// Families that ship byte-level BPE (vocab.json + merges.txt) rather than SentencePiece.
inline bool demo_uses_bpe(const std::string& family) { return family == "bart" || family == "led"; }

inline demo_plan demo_plan_named(const std::string& family, const std::string& name, index_t tiny_vocab,
                                 const std::string& attention = "transient-global") {
    if (family == "locost") return demo_locost(name, tiny_vocab);
    if (family == "t5") return demo_t5(name, tiny_vocab);
    if (family == "bart") return demo_bart(name, tiny_vocab);
    if (family == "longt5") return demo_longt5(name, tiny_vocab, attention);
    if (family == "led") return demo_led(name, tiny_vocab);
    if (family == "pegasus_x") return demo_pegasus_x(name, tiny_vocab);
    throw error("cli.bad_value",
                "demo-checkpoint: option '--family' expects 'locost', 't5', 'bart', 'longt5', 'led' or 'pegasus_x', got '" + family + "'");
}

inline constexpr const char* demo_readme =
    "# UNTRAINED demo checkpoint\n\n"
    "This folder was written by `locost demo-checkpoint`. Its weights are **seeded random numbers**,\n"
    "initialised like a fresh model of its family's original code, and have never been trained.\n"
    "It exists to exercise and measure the software (loading, encoding, generation speed and memory).\n"
    "Anything a model generates from it is meaningless text, not a summary.\n";

} // namespace locost::cli
