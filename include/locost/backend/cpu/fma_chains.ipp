// Independent FMA chains in registers, for runtime/machine.hpp's FMA peak: 12 chains hide the FMA
// latency (4 cycles × 2–3 pipes); the result is a value the compiler cannot drop. Written once
// against simd_levels.hpp's names and compiled at each level by at_levels.ipp (no include guard,
// on purpose).

inline double fma_chains(long iters) {
    constexpr int chains = 12;
    fvec acc[chains];
    for (int c = 0; c < chains; ++c) acc[c] = fvec(1.0f + 0.001f * static_cast<float>(c));
    const fvec a(0.999999f), b(1e-7f);
    for (long i = 0; i < iters; ++i)
        for (int c = 0; c < chains; ++c) acc[c] = fma_v(acc[c], a, b);
    fvec s = acc[0];
    for (int c = 1; c < chains; ++c) s = s + acc[c];
    alignas(64) float lanes[flanes];
    s.store_unaligned(lanes);
    double sum = 0;
    for (const float v : lanes) sum += v;
    return sum;
}
