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
// (the decoder's from its first token, offset by the positions already cached). add() stores no
// table: rows are computed for the positions asked, a tile at a time, so any length works (the
// encoder). add_within() keeps the rows of positions [0, capacity) in the backend's memory,
// made once per capacity, so that a decoding step sends the device nothing but position ids.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../ops/embedding.hpp"
#include "parameter.hpp"

namespace locost::layers {

template <class Scalar, class Backend>
class sinusoidal_positions {
public:
    sinusoidal_positions() = default;
    explicit sinusoidal_positions(index_t H) : H_(H), omega_(static_cast<std::size_t>(H / 2)) {
        const index_t half = H / 2;
        const float step = static_cast<float>(-(std::log(10000.0) / static_cast<double>(half - 1)));
        for (index_t k = 0; k < half; ++k) omega_[static_cast<std::size_t>(k)] = std::exp(static_cast<float>(k) * step);
    }

    // x (rows·T, H): row r's t-th vector gets position first + t.
    void add(Scalar* x, index_t rows, index_t T, index_t first) const {
        const index_t tile = std::max<index_t>(1, std::min<index_t>(T, 1024));
        tensor<float> pe({tile, H_});
        std::vector<std::int64_t> ids(static_cast<std::size_t>(tile));
        for (index_t t0 = 0; t0 < T; t0 += tile) {
            const index_t n = std::min(tile, T - t0);
            fill(first + t0, n, pe.data());
            const tensor<Scalar, Backend> table = to_backend<Scalar, Backend>(pe);
            for (index_t t = 0; t < n; ++t) ids[static_cast<std::size_t>(t)] = t;
            const backend_array<std::int64_t, Backend> rows_of_table(ids.data(), n);  // a device reads its own copy
            for (index_t r = 0; r < rows; ++r) ops::add_embedding<Backend>(table.data(), H_, rows_of_table.data(), n, x + (r * T + t0) * H_);
        }
    }

    // The same for positions first … first + T − 1 < capacity, from the kept table of [0, capacity).
    void add_within(Scalar* x, index_t rows, index_t T, index_t first, index_t capacity) const {
        if (capacity > kept_rows_) {
            tensor<float> pe({capacity, H_});
            fill(0, capacity, pe.data());
            kept_ = to_backend<Scalar, Backend>(std::move(pe));
            kept_rows_ = capacity;
        }
        std::vector<std::int64_t> ids(static_cast<std::size_t>(rows * T));
        for (index_t r = 0; r < rows; ++r)
            for (index_t t = 0; t < T; ++t) ids[static_cast<std::size_t>(r * T + t)] = first + t;
        const backend_array<std::int64_t, Backend> positions(ids.data(), rows * T);  // a device reads its own copy
        ops::add_embedding<Backend>(kept_.data(), H_, positions.data(), rows * T, x);
    }

private:
    // out (n, H): the rows of positions p0 … p0 + n − 1.
    void fill(index_t p0, index_t n, float* out) const {
        const index_t half = H_ / 2;
        for (index_t t = 0; t < n; ++t) {
            const float p = static_cast<float>(p0 + t);
            float* row = out + t * H_;
            for (index_t k = 0; k < half; ++k) {
                const float a = p * omega_[static_cast<std::size_t>(k)];
                row[k] = std::sin(a);
                row[half + k] = std::cos(a);
            }
        }
    }

    index_t H_ = 0;
    std::vector<float> omega_;  // (H/2)
    mutable tensor<Scalar, Backend> kept_;  // add_within's rows of positions [0, kept_rows_)
    mutable index_t kept_rows_ = 0;
};

} // namespace locost::layers
