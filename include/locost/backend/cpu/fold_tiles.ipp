// The float register tiles of the shared-kv attention (fold_tiles.hpp), written once against
// simd_levels.hpp's names and compiled at each level by at_levels.ipp (no include guard, on
// purpose).

// Scores of QG queries against KG rows: P[i·ldp + j] = (q_i · k_j)·scale_j, the QG·KG dot
// products vectorised along d and summed across lanes at the end (d = D·flanes).
template <class Stored, int QG, int KG>
void fold_scores_tile(const float* q, index_t ldq, const Stored* K, index_t ldk, const float* scale, index_t D, float* P, index_t ldp,
                      const Stored* next) {
    fvec acc[QG][KG];
    for (int i = 0; i < QG; ++i)
        for (int j = 0; j < KG; ++j) acc[i][j] = fvec(0.0f);
    // Prefetch the next rows once per cache line: every U-th step (U vectors of stored values).
    constexpr index_t line = std::max<index_t>(1, 64 / static_cast<index_t>(fvec::size * sizeof(Stored))) * flanes;
    for (index_t c = 0; c < D * flanes; c += flanes) {
        fvec k[KG];
        const bool fetch = next && c % line == 0;
        for (int j = 0; j < KG; ++j) {
            if (fetch) LOCOST_PREFETCH_T0(next + j * ldk + c);
            k[j] = widen(K + j * ldk + c);
            LOCOST_KEEP_IN_REGISTER(k[j].data);
        }
        for (int i = 0; i < QG; ++i) {
            fvec qi = fvec::load_unaligned(q + i * ldq + c);
            // Keep q_i and k_j in registers: folded into each FMA as memory operands (GCC's choice)
            // they are loaded again for every product, and 512-bit loads, not FMAs, then bound the
            // loop on Zen 4 (measured: 55 GFLOP/s of a core's 117 with, 100 without).
            LOCOST_KEEP_IN_REGISTER(qi.data);
            for (int j = 0; j < KG; ++j) acc[i][j] = fma_v(qi, k[j], acc[i][j]);
        }
    }
    // (xsimd 8.1's haddp, all sums in one vector, returns the AVX-512 lanes out of order.)
    for (int i = 0; i < QG; ++i)
        for (int j = 0; j < KG; ++j) P[i * ldp + j] = hadd_v(acc[i][j]) * (scale ? scale[j] : 1.0f);
}

// acc (QG rows from column 0, CG vectors wide) = acc_i·rescale_i + Σ_j P[i·ldp + j]·k_j over n
// rows: the online softmax's correction of the running sums is applied as they are loaded.
template <class Stored, int QG, int CG>
void fold_values_tile(const float* P, index_t ldp, index_t n, const Stored* K, index_t ldk, const float* rescale, float* acc, index_t lda) {
    fvec a[QG][CG];
    for (int i = 0; i < QG; ++i) {
        const fvec r(rescale[i]);
        for (int c = 0; c < CG; ++c) a[i][c] = fvec::load_unaligned(acc + i * lda + c * flanes) * r;
    }
    for (index_t j = 0; j < n; ++j) {
        fvec k[CG];
        for (int c = 0; c < CG; ++c) k[c] = widen(K + j * ldk + c * flanes);
        for (int i = 0; i < QG; ++i) {
            const fvec p(P[i * ldp + j]);
            for (int c = 0; c < CG; ++c) a[i][c] = fma_v(p, k[c], a[i][c]);
        }
    }
    for (int i = 0; i < QG; ++i)
        for (int c = 0; c < CG; ++c) a[i][c].store_unaligned(acc + i * lda + c * flanes);
}

// Scores for nq queries against rows [0, n) of K into P (nq × n, stride ldp).
template <class Stored>
void fold_scores(const float* q, index_t nq, index_t ldq, const Stored* K, index_t ldk, const float* scale, index_t n, index_t d, float* P,
                 index_t ldp) {
    const index_t D = d / flanes;
    // Keys outer: a group's rows come from memory once and stay in L1 for every query group; the
    // first query group's tile prefetches the next group's rows (the rows are read here first,
    // from memory, and the hardware prefetcher alone left this loop at half its in-cache rate).
    auto tiles_for = [&]<int KG>(index_t j) {
        for (index_t i0 = 0; i0 < nq; i0 += 4)
            with_count(std::min<index_t>(4, nq - i0), [&]<int QG>() {
                const Stored* next = i0 == 0 && j + 2 * KG <= n ? K + (j + KG) * ldk : nullptr;
                fold_scores_tile<Stored, QG, KG>(q + i0 * ldq, ldq, K + j * ldk, ldk, scale ? scale + j : nullptr, D, P + i0 * ldp + j, ldp,
                                                 next);
            });
    };
    index_t j = 0;
    for (; j + 4 <= n; j += 4) tiles_for.template operator()<4>(j);
    for (; j < n; ++j) tiles_for.template operator()<1>(j);
}

// acc (nq × d, stride lda) = acc_i·rescale_i + P·K over rows [0, n).
template <class Stored>
void fold_values(const float* P, index_t nq, index_t ldp, index_t n, const Stored* K, index_t ldk, const float* rescale, index_t d,
                 float* acc, index_t lda) {
    const index_t D = d / flanes;
    for (index_t i0 = 0; i0 < nq; i0 += 4)
        with_count(std::min<index_t>(4, nq - i0), [&]<int QG>() {
            for (index_t c0 = 0; c0 < D; c0 += 4)
                with_count(std::min<index_t>(4, D - c0), [&]<int CG>() {
                    fold_values_tile<Stored, QG, CG>(P + i0 * ldp, ldp, n, K + c0 * flanes, ldk, rescale + i0, acc + i0 * lda + c0 * flanes,
                                                     lda);
                });
        });
}
