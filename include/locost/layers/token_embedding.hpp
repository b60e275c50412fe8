// A token table and the lookup every stack starts with:
//
//     x[i] = s · E[ids[i]]          E: (vocab, H); s = √H where the family scales (scale_embedding),
//                                   else 1
//
// The table is held through a shared pointer: a decoder's tied LM head (layers/lm_head.hpp) reads
// the same storage. The ids are the caller's host array; a device reads its own copy.
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>

#include "../backend/transfer.hpp"
#include "../ops/embedding.hpp"
#include "parameter.hpp"

namespace locost::layers {

template <class Scalar, class Backend>
class token_embedding {
public:
    token_embedding() = default;
    token_embedding(tensor<float>&& table, double scale)
        : table_(std::make_shared<tensor<Scalar, Backend>>(to_backend<Scalar, Backend>(std::move(table)))),
          scale_(static_cast<Scalar>(scale)) {}

    // x (n, H) = s · E[ids].
    void embed(const std::int64_t* ids, index_t n, Scalar* x) const {
        const backend_array<std::int64_t, Backend> on_backend(ids, n);
        ops::embedding<Backend>(table_->data(), table_->dim(1), on_backend.data(), n, x, scale_);
    }
    std::shared_ptr<tensor<Scalar, Backend>> table() const { return table_; }

private:
    std::shared_ptr<tensor<Scalar, Backend>> table_;
    Scalar scale_ = Scalar(1);
};

}  // namespace locost::layers
