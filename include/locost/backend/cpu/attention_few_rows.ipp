// The fused few-rows attention products (attention_few_rows.hpp), written once against
// simd_levels.hpp's names and compiled at each level by at_levels.ipp (no include guard, on
// purpose); at the AVX-512 levels the scores go by groups of keys too.

#if LOCOST_LEVEL_AVX512
#include "attention_grouped_scores.ipp"
#endif

template <bool Scores, class Stored, int NQ, int D>
void fused_products(const ops::kv_matrix& m, index_t nk, const float* x, index_t ldx, float* y, index_t ldy) {
    const auto* K = static_cast<const Stored*>(m.data);
    const float* held = Scores ? x : y;
    const index_t ldh = Scores ? ldx : ldy;
    fvec r[NQ][D];
    for (int i = 0; i < NQ; ++i)
        for (int c = 0; c < D; ++c) r[i][c] = fvec::load_unaligned(held + i * ldh + c * flanes);
    constexpr index_t row_bytes = static_cast<index_t>(D * flanes * sizeof(Stored)), ahead = 16;  // rows prefetched ahead
    index_t first = 0;
    if constexpr (Scores && flanes == 16) first = grouped_scores<Stored, NQ, D>(m, nk, r, y, ldy);  // (the AVX-512 levels')
    for (index_t j = first; j < nk; ++j) {
        const Stored* row = K + j * m.ld;
        for (index_t b = 0; b < row_bytes; b += 64) LOCOST_PREFETCH_T0(reinterpret_cast<const char*>(row + ahead * m.ld) + b);
        if constexpr (Scores) {
            fvec acc[NQ];
            for (int i = 0; i < NQ; ++i) acc[i] = fvec(0.0f);
            for (int c = 0; c < D; ++c) {
                const fvec k = widen(row + c * flanes);
                for (int i = 0; i < NQ; ++i) acc[i] = fma_v(r[i][c], k, acc[i]);
            }
            // (The scale read after the products: read before them, GCC 12's code for 4 rows over
            // bfloat16 took 7 % longer.)
            const float sc = m.scale ? m.scale[j] : 1.0f;
            for (int i = 0; i < NQ; ++i) y[i * ldy + j] = hadd_v(acc[i]) * sc;
        } else {
            const float sc = m.scale ? m.scale[j] : 1.0f;
            fvec p[NQ];
            for (int i = 0; i < NQ; ++i) p[i] = fvec(x[i * ldx + j] * sc);
            for (int c = 0; c < D; ++c) {
                const fvec v = widen(row + c * flanes);
                for (int i = 0; i < NQ; ++i) r[i][c] = fma_v(p[i], v, r[i][c]);
            }
        }
    }
    if constexpr (!Scores)
        for (int i = 0; i < NQ; ++i)
            for (int c = 0; c < D; ++c) r[i][c].store_unaligned(y + i * ldy + c * flanes);
}

template <bool Scores, int NQ = 1, class... A>
void fused_dispatch(const ops::kv_matrix& m, index_t nq, index_t d, A... a) {
    if constexpr (NQ < 4) {
        if (nq != NQ) return fused_dispatch<Scores, NQ + 1>(m, nq, d, a...);
    }
    auto go = [&]<int D>() {
        if constexpr (NQ * D <= 16) {
            if (m.precision == ops::kv_precision::i8) fused_products<Scores, std::int8_t, NQ, D>(m, a...);
            else if (m.precision == ops::kv_precision::bf16) fused_products<Scores, std::uint16_t, NQ, D>(m, a...);
            else fused_products<Scores, float, NQ, D>(m, a...);  // f32, or native in a float computation
        }
    };
    const index_t D = d / flanes;
    if (D == 2) go.template operator()<2>();
    else if (D == 4) go.template operator()<4>();
    else go.template operator()<8>();
}
