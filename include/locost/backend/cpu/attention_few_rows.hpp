// CPU attention for a few query rows: the path few_rows of kernel<attention_op, cpu>'s table
// (attention.hpp), taken for a float computation whose query rows and width fusable() takes
// (1–4 rows: a decoding step's hypotheses) unless the online path takes the problem; that path
// (attention_online.hpp) runs its exact products through these kernels too.
//
// Fused products with a reduced-precision cache for a few query rows (a decoding step's
// hypotheses of one document): each stored key or value row is loaded once in its stored width,
// widened in registers (exact) and used by every query row, and int8's per-row scale is applied
// to the score, resp. to the probability, so the cache is read once and never expanded. Widening
// blocks into a float buffer and multiplying those by GEMM (the general path, attention.hpp)
// writes and reads four times the int8 bytes again; at 697K tokens that made a step 2.9x the
// time to read the cache once.
//
// Scores: y (NQ × nk, stride ldy) = x (the queries, NQ rows, stride ldx) · Kᵀ;
// values: y (NQ rows, stride ldy) += x (the probabilities, NQ × nk, stride ldx) · V.
// A query row's d values are D vectors (d = D·flanes); the NQ·D vectors of the queries (scores),
// resp. of the outputs (values), stay in registers; with AVX-512 the scores go by groups of keys
// (grouped_scores) and only the last few keys one by one. Rows are prefetched 16 ahead: one step
// consumes one or two cache lines, and prefetching keeps enough of them in flight to read the
// cache at the machine's bandwidth.
#pragma once
#include <cstdint>
#include <xsimd/xsimd.hpp>

#include "../../ops/attention.hpp"
#include "isa.hpp"
#include "linear.hpp"
#include "simd_levels.hpp"

namespace locost {

namespace cpu_detail {

#define LOCOST_LEVEL_BODY "attention_few_rows.ipp"
#include "at_levels.ipp"

// Whether the fused kernels take this matrix for nq rows of width d (a float computation), and
// they then run. A float32 cache goes through them too: their prefetching reads it at the
// bandwidth, where the general products' two passes over a head's 64 columns did not (a batch of
// 18 short documents decoding together: 22 ms of a 51 ms step in cross-attention).
inline bool fusable(const ops::kv_matrix& /*any precision*/, index_t nq, index_t d) {
    const index_t flanes = level_flanes();
    return nq >= 1 && nq <= 4 && (d == 4 * flanes || d == 2 * flanes || d == 8 * flanes) && (d / flanes) * nq <= 16;
}

// The fused products at the process's level (d: as fusable() takes it).
template <bool Scores, class... A>
void fused_dispatch(const ops::kv_matrix& m, index_t nq, index_t d, A... a) {
    LOCOST_RETURN_AT_LEVEL(fused_dispatch<Scores>(m, nq, d, a...));
}

}  // namespace cpu_detail

}  // namespace locost
