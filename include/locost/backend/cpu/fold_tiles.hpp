// Register tiles of the CPU's shared-kv attention (shared_kv_attention.hpp, folded
// cross-attention) for float computation over rows stored as float, bfloat16 or int8. Each stored
// row is widened in registers, exactly, as it is loaded, so a block is read in its stored width
// (from L2, where it stays for both products) and never written out widened; the GEMM path it
// replaces widened every block into a float buffer that OpenBLAS then packed again for each of
// the two products. Compiled at each level of simd_levels.hpp (fold_tiles.ipp); the AVX512-BF16 tiles for bfloat16
// products are in fold_tiles_bf16.hpp.
#pragma once
#include <algorithm>
#include <xsimd/xsimd.hpp>

#include "isa.hpp"
#include "linear.hpp"
#include "simd_levels.hpp"

namespace locost {

namespace cpu_detail {

// Calls f.template operator()<N>() for n in 1..4 (the tiles' remainders). Always inlined, so that
// in a kernel of a target region (isa.hpp) f's body is inlined too: a function of the build's own
// level cannot inline a region's lambda.
template <class F>
[[gnu::always_inline]] inline void with_count(index_t n, F&& f) {
    switch (n) {
    case 1: f.template operator()<1>(); break;
    case 2: f.template operator()<2>(); break;
    case 3: f.template operator()<3>(); break;
    default: f.template operator()<4>(); break;
    }
}

#define LOCOST_LEVEL_BODY "fold_tiles.ipp"
#include "at_levels.ipp"

// fold_scores and fold_values at the process's level (d: a multiple of level_flanes()).
template <class Stored>
void fold_scores(const float* q, index_t nq, index_t ldq, const Stored* K, index_t ldk, const float* scale, index_t n, index_t d, float* P,
                 index_t ldp) {
    LOCOST_RETURN_AT_LEVEL(fold_scores(q, nq, ldq, K, ldk, scale, n, d, P, ldp));
}

template <class Stored>
void fold_values(const float* P, index_t nq, index_t ldp, index_t n, const Stored* K, index_t ldk, const float* rescale, index_t d,
                 float* acc, index_t lda) {
    LOCOST_RETURN_AT_LEVEL(fold_values(P, nq, ldp, n, K, ldk, rescale, d, acc, lda));
}

}  // namespace cpu_detail

}  // namespace locost
