// Embedding lookup: out[i, :] = table[ids[i], :] for i < n (ids already checked < rows).
#pragma once
#include <cstdint>

#include "../backend/backend.hpp"
#include "../core/tensor.hpp"

namespace locost::ops {

struct embedding_op {};

template <class Backend, class T>
void embedding(const T* table, index_t dim, const std::int64_t* ids, index_t n, T* out) {
    kernel<embedding_op, Backend, T>::run(table, dim, ids, n, out);
}

} // namespace locost::ops
