// What layers share for building their storage from the float32 tensors they read
// (layers/tensor_source.hpp) and for their working memory:
//
//   stack_rows(a, b)     rows of a then b: two projections of one input fused into one GEMM
//   scaled(t, s)         t·s, in double then rounded (a scale folded into a weight at load)
//   concat({a, b, …})    vectors end to end (the biases of fused projections)
//   scratch_buffer       a growable buffer in a backend's memory
//
// The crossing from float32 host tensors into a backend's storage is backend/transfer.hpp's.
#pragma once
#include <algorithm>
#include <cstring>
#include <vector>

#include "../backend/transfer.hpp"
#include "../core/tensor.hpp"

namespace locost::layers {

// Rows of a and b stacked: (ra + rb, n).
inline tensor<float> stack_rows(const tensor<float>& a, const tensor<float>& b) {
    LOCOST_ASSERT(a.dim(1) == b.dim(1));
    tensor<float> out({a.dim(0) + b.dim(0), a.dim(1)});
    prefault_pages(out.data(), static_cast<std::size_t>(out.numel()) * sizeof(float));
    std::memcpy(out.data(), a.data(), static_cast<std::size_t>(a.numel()) * sizeof(float));
    std::memcpy(out.data() + a.numel(), b.data(), static_cast<std::size_t>(b.numel()) * sizeof(float));
    return out;
}

// t·s, each product in double and rounded once (the reference scales the float32 result of the
// projection; folding s into the weight gives the same values up to that one rounding).
inline tensor<float> scaled(const tensor<float>& t, double s) {
    tensor<float> out = t.clone();
    for (index_t i = 0; i < out.numel(); ++i) out[i] = static_cast<float>(static_cast<double>(out[i]) * s);
    return out;
}

// Vectors end to end.
inline tensor<float> concat(const std::vector<const tensor<float>*>& parts) {
    index_t n = 0;
    for (const auto* p : parts) n += p->numel();
    tensor<float> out({n});
    index_t at = 0;
    for (const auto* p : parts) {
        std::copy_n(p->data(), p->numel(), out.data() + at);
        at += p->numel();
    }
    return out;
}

// A growable scratch buffer in a backend's memory (contents not kept when it grows).
template <class T, class Backend = cpu>
class scratch_buffer {
public:
    T* get(index_t n) {
        if (n > size_) {
            data_.reset();  // the old block goes first: the two are never held together
            data_ = memory<Backend>::template allocate<T>(static_cast<std::size_t>(n));
            size_ = n;
        }
        return data_.get();
    }
    void release() {
        data_.reset();
        size_ = 0;
    }

private:
    typename memory<Backend>::template pointer<T> data_;
    index_t size_ = 0;
};

}  // namespace locost::layers
