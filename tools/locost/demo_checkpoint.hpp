// `locost demo-checkpoint`: a checkpoint of a model family with seeded random, UNTRAINED weights.
// What to write — the config, the tensors, how each is initialised (the way the family's original
// code initialises a fresh model, so activations stay in a realistic range) — is the family's
// (models/demo.hpp, the families' demo()); the tool draws the numbers: one seeded stream over the
// tensors in the order the family's loaders read them. The random numbers come from our own
// splitmix64 + Box–Muller so a seed gives the same checkpoint on every platform.
#pragma once
#include <locost/locost.hpp>

#include <algorithm>
#include <cmath>
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
        if (have_spare_) {
            have_spare_ = false;
            return spare_;
        }
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

// x (the tensor `r` records) initialised by `rule`.
inline void apply_init(const models::init_rule& rule, const layers::param_record& r, demo_rng& rng, float* x) {
    using kind = models::init_rule::kind;
    const index_t count = r.shape.numel();
    switch (rule.how) {
    case kind::constant: std::fill_n(x, count, static_cast<float>(rule.a)); break;
    case kind::normal:
        for (index_t i = 0; i < count; ++i) x[i] = static_cast<float>(rule.a * rng.normal());
        break;
    case kind::uniform:
        for (index_t i = 0; i < count; ++i) x[i] = static_cast<float>(rule.a + (rule.b - rule.a) * rng.uniform());
        break;
    case kind::s4d_frequency: {
        const index_t modes = r.shape.back();
        for (index_t i = 0; i < count; ++i) x[i] = static_cast<float>(3.141592653589793 * static_cast<double>(i % modes));
        break;
    }
    case kind::s4d_unit_real:
        for (index_t i = 0; i < count; ++i) x[i] = (i % 2 == 0) ? 1.0f : 0.0f;
        break;
    }
    if (rule.zero_row) {
        const index_t width = count / r.shape[0];
        std::fill_n(x + *rule.zero_row * width, width, 0.0f);
    }
}

inline constexpr const char* demo_readme =
    "# UNTRAINED demo checkpoint\n\n"
    "This folder was written by `locost demo-checkpoint`. Its weights are **seeded random numbers**,\n"
    "initialised like a fresh model of its family's original code, and have never been trained.\n"
    "It exists to exercise and measure the software (loading, encoding, generation speed and memory).\n"
    "Anything a model generates from it is meaningless text, not a summary.\n";

}  // namespace locost::cli
