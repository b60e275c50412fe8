// Shared by the CPU backend's tests (tests/backend/cpu): uniform random values in [-1, 1), seeded.
#pragma once
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace {

template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<double> d(-1.0, 1.0);
    std::vector<T> v(n);
    for (auto& x : v) x = static_cast<T>(d(g));
    return v;
}

}  // namespace
