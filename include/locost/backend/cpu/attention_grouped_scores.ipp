// The AVX-512 scores of attention_few_rows.ipp by groups of keys, compiled where vectors have 16
// lanes: included by attention_few_rows.ipp at the AVX-512 levels (LOCOST_LEVEL_AVX512 of
// at_levels.ipp: at_avx512, and at_build in an AVX-512 build); no include guard, on purpose.

// Lane t of the result is the sum of the 16 lanes of v[t]: a transposing tree of 45 instructions
// for the sixteen sums, where reducing each vector alone takes about nine. Always inlined: as a
// call (GCC 12 declined to inline it in the compiled library) the sixteen accumulators went
// through memory, and the call took 45 % of beam 4's scores.
[[gnu::always_inline]] inline __m512 sum_lanes16(const __m512 v[16]) {
    constexpr __mmask16 all = 0xFFFF;
    constexpr __mmask8 all8 = 0xFF;
    auto lo64 = [](__m512 a, __m512 b) {
        return _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(all8, _mm512_castps_pd(a), _mm512_castps_pd(b)));
    };
    auto hi64 = [](__m512 a, __m512 b) {
        return _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(all8, _mm512_castps_pd(a), _mm512_castps_pd(b)));
    };
    __m512 s2[8], s4[4];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k)  // per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3] of a = v[2k], b = v[2k+1]
        s2[k] = _mm512_add_ps(_mm512_maskz_unpacklo_ps(all, v[2 * k], v[2 * k + 1]), _mm512_maskz_unpackhi_ps(all, v[2 * k], v[2 * k + 1]));
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k)  // per 128-bit lane L: the sums over lane L of v[4k] … v[4k+3]
        s4[k] = _mm512_add_ps(lo64(s2[2 * k], s2[2 * k + 1]), hi64(s2[2 * k], s2[2 * k + 1]));
    const __m512 u0 =
        _mm512_add_ps(_mm512_maskz_shuffle_f32x4(all, s4[0], s4[1], 0x88), _mm512_maskz_shuffle_f32x4(all, s4[0], s4[1], 0xDD));
    const __m512 u1 =
        _mm512_add_ps(_mm512_maskz_shuffle_f32x4(all, s4[2], s4[3], 0x88), _mm512_maskz_shuffle_f32x4(all, s4[2], s4[3], 0xDD));
    return _mm512_add_ps(_mm512_maskz_shuffle_f32x4(all, u0, u1, 0x88), _mm512_maskz_shuffle_f32x4(all, u0, u1, 0xDD));
}

// Scores of NQ query rows (in registers, r) over the keys [0, n − n mod G) in groups of G = 16/P
// keys (P: NQ rounded up to a power of two): the G·NQ dot products of a group accumulate in
// sixteen vectors, one per (query, key), and one transposing tree reduces them all, so a score
// costs ~3 reduction instructions instead of a horizontal sum of its own (at 4 queries, beam 4,
// those sums were half of the scores' instructions). Returns the keys done; the caller finishes
// the rest one by one.
template <class Stored, int NQ, int D>
index_t grouped_scores(const ops::kv_matrix& m, index_t nk, const fvec (&r)[NQ][D], float* y, index_t ldy) {
    constexpr int P = NQ == 1 ? 1 : NQ == 2 ? 2 : 4, G = 16 / P;
    const auto* K = static_cast<const Stored*>(m.data);
    constexpr index_t row_bytes = static_cast<index_t>(D * flanes * sizeof(Stored)), ahead = 16;
    const index_t ng = nk / G * G;
    for (index_t j0 = 0; j0 < ng; j0 += G) {
        __m512 acc[16];
#pragma GCC unroll 16
        for (int t = 0; t < 16; ++t) acc[t] = _mm512_setzero_ps();
#pragma GCC unroll 16
        for (int g = 0; g < G; ++g) {
            const Stored* row = K + (j0 + g) * m.ld;
            for (index_t b = 0; b < row_bytes; b += 64) LOCOST_PREFETCH_T0(reinterpret_cast<const char*>(row + ahead * m.ld) + b);
#pragma GCC unroll 8
            for (int c = 0; c < D; ++c) {
                const __m512 k = static_cast<__m512>(widen(row + c * flanes));
#pragma GCC unroll 4
                for (int i = 0; i < NQ; ++i) acc[i * G + g] = _mm512_fmadd_ps(static_cast<__m512>(r[i][c]), k, acc[i * G + g]);
            }
        }
        __m512 s = sum_lanes16(acc);  // lane i·G + g: query i, key j0 + g
        if (m.scale) {
            const float* sc = m.scale + j0;
            if constexpr (G == 16) s = _mm512_mul_ps(s, _mm512_loadu_ps(sc));
            else if constexpr (G == 8) s = _mm512_mul_ps(s, _mm512_broadcast_f32x8(_mm256_loadu_ps(sc)));
            else s = _mm512_mul_ps(s, _mm512_broadcast_f32x4(_mm_loadu_ps(sc)));
        }
        if constexpr (G == 16) _mm512_storeu_ps(y + j0, s);
        else if constexpr (G == 8) {
            _mm256_storeu_ps(y + j0, _mm512_castps512_ps256(s));
            _mm256_storeu_ps(y + ldy + j0, _mm512_extractf32x8_ps(s, 1));
        } else {
            _mm_storeu_ps(y + j0, _mm512_castps512_ps128(s));
            _mm_storeu_ps(y + ldy + j0, _mm512_extractf32x4_ps(s, 1));
            if constexpr (NQ > 2) _mm_storeu_ps(y + 2 * ldy + j0, _mm512_extractf32x4_ps(s, 2));
            if constexpr (NQ > 3) _mm_storeu_ps(y + 3 * ldy + j0, _mm512_extractf32x4_ps(s, 3));
        }
    }
    return ng;
}
