// Scaled-dot-product attention without the scaling (T5 folds 1/√d_kv into its weights), for a
// batch of independent problems, each one head of one sequence:
//
//     O = softmax(Q·Kᵀ + bias) · V          Q (nq, d), K and V (nk, d), bias (nq, nk) or none
//
// A problem may have a second key/value segment (k2, v2: nk2 rows, e.g. the global tokens of
// local attention, layers/local_attention.hpp): the softmax runs over both segments together, as
// if they were one (nk + nk2)-row matrix. Biases come as up to three terms, each optional:
// `bias` over the first segment and `bias2` over the second, row i at bias + i·ldb (ldb = dense:
// nk resp. nk2; 0: one row for every query; −1: a Toeplitz band, entry (i, j) depends on j − i
// only, so a window mask or a relative-position bias of a long band is one short vector), and
// `key_bias` (nk) added to every row of the first segment (a padding mask).
//
// Keys and values may be stored in float32, bfloat16, or int8 with one float scale per key row
// (value = int8 · scale): the cross-attention cache's precisions (layers/kv_cache.hpp). The
// softmax accumulates in float32; −inf in bias masks a key. A query row whose keys are all masked
// gets zeros.
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

#include "../backend/backend.hpp"
#include "../core/tensor.hpp"
#include "precision.hpp"

namespace locost::ops {

// kv_precision, kv_matrix: ops/precision.hpp.

// Row stride of a bias that is stored densely (nk, resp. nk2, values per query row).
inline constexpr index_t dense_bias = std::numeric_limits<index_t>::max();

// How an attention multiplies: exactly in the scalar type; bf16 (compute = bf16;
// shared_kv_attention over bfloat16 states): the queries and probabilities rounded to bfloat16,
// float32 sums, at twice the rate where the CPU has AVX512-BF16; i8 (compute = int8; over int8
// states, or attention over int8 keys and values): the queries quantized per row and each block's
// probabilities per query to 8 bits, exact int32 sums, at four times the rate where the CPU has
// AVX512-VNNI (shared_kv_attention over bfloat16 states: as bf16). Many queries (16 or more)
// over float32 keys and values — the dense encoders' self-attention (T5, BART, SLED's chunks)
// under compute = bf16 or int8 — multiply in bfloat16 under either: queries, keys, the
// softmax's exponentials (each row scaled by its 1/Σ after the product) and values rounded,
// float32 sums, through oneDNN's matmul (AMX tiles where the CPU has them).
// A backend, or a case, without such products computes exactly.
enum class attention_products { exact, bf16, i8 };

template <class Scalar>
struct attention_problem {
    const Scalar* q = nullptr;  // (nq, d), row stride ldq
    index_t nq = 0, ldq = 0;
    kv_matrix k, v;  // (nk, d)
    index_t nk = 0;
    kv_matrix k2, v2;  // (nk2, d): the optional second segment
    index_t nk2 = 0;
    const Scalar* bias = nullptr;  // first segment: row i at bias + i·ldb, or nullptr
    index_t ldb = dense_bias;
    const Scalar* bias2 = nullptr;  // second segment: row i at bias2 + i·ldb2, or nullptr
    index_t ldb2 = dense_bias;
    const Scalar* key_bias = nullptr;  // (nk): added to every row's first segment, or nullptr
    Scalar* out = nullptr;             // (nq, d), row stride ldo
    index_t ldo = 0;
    attention_products products = attention_products::exact;  // (the CPU's: i8 for up to 4 query rows)
};

struct attention_op {};

// Solves every problem (head dimension d); the backend spreads them over its threads.
template <class Backend, class Scalar>
void attention(const std::vector<attention_problem<Scalar>>& problems, index_t d) {
    kernel<attention_op, Backend, Scalar>::run(problems, d);
}

// Many queries over one long matrix that is both keys and values (folded cross-attention,
// layers/kv_cache.hpp: the queries are every head of every decoder row of one document, the
// matrix is the document's encoder states):
//
//     out[i] = softmax(q[i]·Sᵀ) · S        q (nq, d) row stride ldq, S (nk, d), out (nq, d) row stride ldo
//
// Unlike attention(), whose problems each read their keys, this reads S once for all queries: the
// backend splits the keys (not the queries) over its threads and merges the threads' partial
// softmax sums.
struct shared_kv_attention_op {};

template <class Backend, class Scalar>
void shared_kv_attention(const Scalar* q, index_t nq, index_t ldq, const kv_matrix& states, index_t nk, index_t d, Scalar* out, index_t ldo,
                         attention_products products = attention_products::exact) {
    if (nq == 0) return;
    kernel<shared_kv_attention_op, Backend, Scalar>::run(q, nq, ldq, states, nk, d, out, ldo, products);
}

}  // namespace locost::ops
