// Sinusoidal absolute positions (Pegasus-X) — PegasusXSinusoidalPositionalEmbedding, the
// Transformer's table with the sines in the first half and the cosines in the second:
//
//     ω_k = exp(k · −ln(10000) / (H/2 − 1))           k = 0 … H/2 − 1
//     x[t] += [ sin(p·ω_0) … sin(p·ω_{H/2−1}) | cos(p·ω_0) … cos(p·ω_{H/2−1}) ]     p = first + t
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

#include "../ops/rows.hpp"
#include "parameter.hpp"

namespace locost::layers {

template <class Scalar, class Backend>
class sinusoidal_positions {
public:
    sinusoidal_positions() = default;
    explicit sinusoidal_positions(index_t H) : H_(H) {
        const index_t half = H / 2;
        const float step = static_cast<float>(-(std::log(10000.0) / static_cast<double>(half - 1)));
        tensor<float> omega({half});
        for (index_t k = 0; k < half; ++k) omega[k] = std::exp(static_cast<float>(k) * step);
        omega_ = move_to_backend<Backend>(std::move(omega));
    }

    // The frequencies it holds on the backend: H/2 floats.
    static index_t table_elements(index_t H) { return H / 2; }

    // x (rows·T, H): row r's t-th vector gets position first + t.
    void add(Scalar* x, index_t rows, index_t T, index_t first) const { ops::add_sinusoid<Backend>(omega_.data(), H_, first, rows, T, x); }

private:
    index_t H_ = 0;
    tensor<float, Backend> omega_;  // (H/2)
};

} // namespace locost::layers
