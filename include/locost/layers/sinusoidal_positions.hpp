// Sinusoidal absolute positions — the Transformer's table with the sines in the first half and
// the cosines in the second:
//
//     x[t] += [ sin(p·ω_0) … sin(p·ω_{H/2−1}) | cos(p·ω_0) … cos(p·ω_{H/2−1}) ]     p = first + t
//
// with one of two frequency rules (frequency_rule), which the families that use them differ by:
//
//     timing_signal   ω_k = exp(k · −ln(10000) / (H/2 − 1))   tensor2tensor's; Pegasus-X
//     transformer     ω_k = 10000^(−2k / H)                   "Attention is all you need"'s, with
//                                                             the sines first (Pegasus, Marian;
//                                                             their code builds the table in
//                                                             float64, p·ω here is float32)
//
// and, for a family that scales its token embeddings and adds these, sinusoidal_embedding:
//
//     x[t] = s · E[ids[t]] + PE(first + t)
//
// Conventions: H even and ≥ 4 (the family's config checks it). Every step is float32 as torch
// computes it for a float32 model (k·(−ln 10000/(H/2 − 1)) with the factor rounded to float,
// exp, p·ω_k in float, sin/cos), whatever the scalar type, so a double model sees the table its
// float32 reference saw. Positions count from the start of the sequence whatever the padding
// (the decoder's from its first token, offset by the positions already cached). No table is
// stored: ops::add_sinusoid computes the rows asked for from the H/2 frequencies, on the backend,
// so any length works and a decoding step sends the backend nothing.
#pragma once
#include <cmath>
#include <vector>

#include <memory>

#include "../ops/rows.hpp"
#include "parameter.hpp"
#include "token_embedding.hpp"

namespace locost::layers {

enum class frequency_rule { timing_signal, transformer };

// ω_k of `rule` for a width H, in float32 as torch computes a float32 model's table.
inline tensor<float> sinusoid_frequencies(index_t H, frequency_rule rule) {
    const index_t half = H / 2;
    tensor<float> omega({half});
    if (rule == frequency_rule::timing_signal) {
        const float step = static_cast<float>(-(std::log(10000.0) / static_cast<double>(half - 1)));
        for (index_t k = 0; k < half; ++k) omega[k] = std::exp(static_cast<float>(k) * step);
    } else {
        for (index_t k = 0; k < half; ++k)
            omega[k] = static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(k) / static_cast<double>(H)));
    }
    return omega;
}

template <class Scalar, class Backend>
class sinusoidal_positions {
public:
    sinusoidal_positions() = default;
    sinusoidal_positions(index_t H, frequency_rule rule) : H_(H), omega_(move_to_backend<Backend>(sinusoid_frequencies(H, rule))) {}

    // The frequencies it holds on the backend: H/2 floats.
    static index_t table_elements(index_t H) { return H / 2; }

    // x (rows·T, H): row r's t-th vector gets position first + t.
    void add(Scalar* x, index_t rows, index_t T, index_t first) const { ops::add_sinusoid<Backend>(omega_.data(), H_, first, rows, T, x); }

private:
    index_t H_ = 0;
    tensor<float, Backend> omega_;  // (H/2)
};

// s·E[ids] + PE(position), for either stack of a family with sinusoidal positions.
template <class Scalar, class Backend>
class sinusoidal_embedding {
public:
    sinusoidal_embedding() = default;
    sinusoidal_embedding(tensor<float>&& shared, double scale, index_t H, frequency_rule rule)
        : tokens_(std::move(shared), scale), positions_(H, rule) {}

    std::shared_ptr<tensor<Scalar, Backend>> embedding() const { return tokens_.table(); }

    // x (rows·T, H): row r's t-th id at position first + t.
    void embed(const std::int64_t* ids, index_t rows, index_t T, index_t first, Scalar* x) const {
        tokens_.embed(ids, rows * T, x);
        positions_.add(x, rows, T, first);
    }

private:
    token_embedding<Scalar, Backend> tokens_;
    sinusoidal_positions<Scalar, Backend> positions_;
};

}  // namespace locost::layers
