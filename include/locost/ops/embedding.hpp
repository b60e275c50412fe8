// Embedding lookups (ids already checked against the table's rows):
//   embedding       out[i, :] = scale · table[ids[i], :]      token embeddings (BART: scale √d_model
//                                                             with scale_embedding; T5: 1)
//   add_embedding   out[i, :] += table[ids[i], :]             learned positions added to tokens
#pragma once
#include <cstdint>

#include "../backend/backend.hpp"
#include "../core/tensor.hpp"

namespace locost::ops {

struct embedding_op {};
struct add_embedding_op {};

template <class Backend, class T>
void embedding(const T* table, index_t dim, const std::int64_t* ids, index_t n, T* out, T scale = T(1)) {
    kernel<embedding_op, Backend, T>::run(table, dim, ids, n, out, scale);
}

template <class Backend, class T>
void add_embedding(const T* table, index_t dim, const std::int64_t* ids, index_t n, T* out) {
    kernel<add_embedding_op, Backend, T>::run(table, dim, ids, n, out);
}

}  // namespace locost::ops
