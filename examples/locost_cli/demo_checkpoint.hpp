// `locost demo-checkpoint`: a LOCOST checkpoint with seeded random, UNTRAINED weights,
// initialised the way the original code initialises a fresh model so that activations stay
// in a realistic range (flbbb/locost-summarization: LOCOSTPreTrainedModel._init_weights,
// SSKernelDiag.__init__, ssm_init.dplr "diag-lin"; PyTorch defaults for everything those leave alone):
//   RMSNorm weights 1;  shared embedding N(0, 1);
//   feed-forward wi/wi_0/wi_1 N(0, d_model^-1/2), wo N(0, d_ff^-1/2);
//   other Linear layers (S4D q/k/output projections, decoder attention, relative bias via
//   nn.Embedding N(0,1)) PyTorch's default U(-1/sqrt(fan_in), +1/sqrt(fan_in)) for weight and bias;
//   S4D: log_dt U[log 1e-3, log 1e-1], A = -0.5 + i·pi·n (inv_A_real = log 0.5), B = 1,
//        C complex normal (unit variance), D N(0, 1).
// The random numbers come from our own splitmix64 + Box–Muller so a seed gives the same
// checkpoint on every platform.
#pragma once
#include <locost/locost.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
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

struct demo_preset {
    models::locost_dims dims;
    index_t local_radius = 127, global_block_size = 16, max_distance = 128;
};

inline demo_preset demo_preset_named(const std::string& name) {
    demo_preset p;
    if (name == "base") return p;  // configs/pretraining/locost_default.yaml
    if (name == "tiny") {          // the dimensions of the shared reference checkpoint
        p.dims.d_model = 64; p.dims.d_state = 16; p.dims.d_kv = 16;
        p.dims.d_ff = 128; p.dims.num_layers = 2; p.dims.num_decoder_layers = 2; p.dims.num_heads = 4;
        return p;
    }
    throw error("cli.bad_value", "demo-checkpoint: option '--config' expects 'base' or 'tiny', got '" + name + "'");
}

inline nlohmann::json demo_config_json(const demo_preset& p) {
    const auto& d = p.dims;
    return {
        {"vocab_size", d.vocab_size}, {"d_model", d.d_model}, {"d_state", d.d_state}, {"d_kv", d.d_kv},
        {"d_ff", d.d_ff}, {"num_ssm_heads", d.num_ssm_heads}, {"num_layers", d.num_layers},
        {"num_decoder_layers", d.num_decoder_layers}, {"num_heads", d.num_heads},
        {"local_radius", p.local_radius}, {"global_block_size", p.global_block_size},
        {"relative_attention_num_buckets", d.relative_attention_num_buckets},
        {"relative_attention_max_distance", p.max_distance}, {"dropout_rate", 0.0},
        {"layer_norm_epsilon", 1e-6}, {"initializer_factor", 1.0},
        {"feed_forward_proj", d.gated_ff ? "gated-gelu" : "relu"}, {"encoder_attention_type", "local"},
        {"use_cache", true}, {"use_fast_fft_conv", false}, {"bidirectional", d.bidirectional},
        {"gating", d.gating}, {"tie_word_embeddings", d.tie_word_embeddings}, {"is_encoder_decoder", true},
        {"pad_token_id", 0}, {"eos_token_id", 1}, {"decoder_start_token_id", 0},
        {"architectures", {"LOCOSTForConditionalGeneration"}}, {"model_type", "locost"},
        {"locost_demo_checkpoint", "UNTRAINED: seeded random weights written by 'locost demo-checkpoint'; outputs are not meaningful"},
    };
}

// Fills one parameter according to the original initialisation (see the top comment).
inline void demo_init(const models::parameter_spec& spec, const models::locost_dims& d, demo_rng& rng, float* x) {
    const auto& n = spec.name;
    const index_t count = spec.shape.numel();
    auto ends_with = [&](const char* s) {
        const std::string t(s);
        return n.size() >= t.size() && n.compare(n.size() - t.size(), t.size(), t) == 0;
    };
    auto normal = [&](double sd) { for (index_t i = 0; i < count; ++i) x[i] = static_cast<float>(sd * rng.normal()); };
    auto uniform = [&](double lo, double hi) { for (index_t i = 0; i < count; ++i) x[i] = static_cast<float>(lo + (hi - lo) * rng.uniform()); };
    const double H = static_cast<double>(d.d_model);
    if (ends_with("norm.weight")) {
        std::fill_n(x, count, 1.0f);
    } else if (n == "shared.weight" || ends_with("relative_attention_bias.weight") || ends_with("ssm_layer.D")) {
        normal(1.0);
    } else if (ends_with("wi.weight") || ends_with("wi_0.weight") || ends_with("wi_1.weight")) {
        normal(std::pow(H, -0.5));
    } else if (ends_with("wo.weight")) {
        normal(std::pow(static_cast<double>(d.d_ff), -0.5));
    } else if (ends_with("kernel.log_dt")) {
        uniform(std::log(1e-3), std::log(1e-1));
    } else if (ends_with("kernel.inv_A_real")) {
        std::fill_n(x, count, static_cast<float>(std::log(0.5)));
    } else if (ends_with("kernel.A_imag")) {
        const index_t modes = spec.shape[1];
        for (index_t i = 0; i < count; ++i) x[i] = static_cast<float>(3.141592653589793 * static_cast<double>(i % modes));
    } else if (ends_with("kernel.B")) {
        for (index_t i = 0; i < count; ++i) x[i] = (i % 2 == 0) ? 1.0f : 0.0f;
    } else if (ends_with("kernel.C")) {
        normal(std::sqrt(0.5));  // complex normal: real and imaginary parts each N(0, 1/2)
    } else {
        // PyTorch nn.Linear default (kaiming_uniform with a = sqrt(5)) for weights and biases alike.
        const double fan_in = ends_with(".bias") ? H : static_cast<double>(spec.shape.back());
        const double bound = 1.0 / std::sqrt(fan_in);
        uniform(-bound, bound);
    }
}

inline constexpr const char* demo_readme =
    "# UNTRAINED demo checkpoint\n\n"
    "This folder was written by `locost demo-checkpoint`. Its weights are **seeded random numbers**,\n"
    "initialised like a fresh LOCOST model of the original code, and have never been trained.\n"
    "It exists to exercise and measure the software (loading, encoding, generation speed and memory).\n"
    "Anything a model generates from it is meaningless text, not a summary.\n";

} // namespace locost::cli
