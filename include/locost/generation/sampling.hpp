// Sampling's draw: one token from softmax(row) per row and step, after the processors and the
// warpers (logits_processors.hpp) have shaped the row; greedy_or_sample (search.hpp) runs the
// loop. The generator is our own (splitmix64 → uniform → inverse CDF in double), so a seed gives
// the same tokens on every platform; it is not PyTorch's random stream.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "logits_processors.hpp"

namespace locost::generation::detail {

// splitmix64: a tiny, well-mixed generator whose stream is the same on every platform.
class rng {
public:
    explicit rng(std::uint64_t seed) : s_(seed) {}
    double uniform() {
        std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
    }

private:
    std::uint64_t s_;
};

// Draws one token id per call from softmax(row), in double: the first id whose cumulative
// probability passes a uniform draw times the sum, never an id of probability 0. The
// probabilities' buffer is kept between draws (every entry is rewritten by each draw).
class sampler {
public:
    explicit sampler(std::uint64_t seed) : gen_(seed) {}

    std::int64_t draw(const float* row, index_t V) {
        p_.resize(static_cast<std::size_t>(V));
        float mx = neg_inf;
        for (index_t i = 0; i < V; ++i) mx = std::max(mx, row[i]);
        double sum = 0;
        for (index_t i = 0; i < V; ++i) sum += (p_[static_cast<std::size_t>(i)] = std::exp(static_cast<double>(row[i] - mx)));
        double u = gen_.uniform() * sum;
        std::int64_t tok = V - 1;
        for (index_t i = 0; i < V; ++i) {
            if (p_[static_cast<std::size_t>(i)] > 0 && (u -= p_[static_cast<std::size_t>(i)]) < 0) {
                tok = i;
                break;
            }
        }
        while (tok > 0 && p_[static_cast<std::size_t>(tok)] == 0) --tok;
        return tok;
    }

private:
    rng gen_;
    std::vector<double> p_;  // softmax numerators of the row being drawn from
};

}  // namespace locost::generation::detail
