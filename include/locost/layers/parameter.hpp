// Moving weights from a checkpoint (float32 on the host) into the storage a layer computes
// with: the layer's scalar type on the layer's backend. The one place that converts.
#pragma once
#include <cstring>

#include "../core/tensor.hpp"

namespace locost::layers {

template <class Scalar, class Backend>
tensor<Scalar, Backend> to_backend(const tensor<float>& t) {
    static_assert(is_host<Backend>, "to_backend: this backend has no host-to-device copy yet");
    tensor<Scalar, Backend> out(t.shape());
    prefault_pages(out.data(), static_cast<std::size_t>(out.numel()) * sizeof(Scalar));
    if constexpr (std::is_same_v<Scalar, float>) {
        if (t.numel()) std::memcpy(out.data(), t.data(), static_cast<std::size_t>(t.numel()) * sizeof(float));
    } else {
        for (index_t i = 0; i < t.numel(); ++i) out[i] = static_cast<Scalar>(t[i]);
    }
    return out;
}

// The same for a tensor the caller gives up: float32 on the host is kept as it is (no copy).
template <class Scalar, class Backend>
tensor<Scalar, Backend> to_backend(tensor<float>&& t) {
    if constexpr (std::is_same_v<Scalar, float> && std::is_same_v<Backend, cpu>) return std::move(t);
    else return to_backend<Scalar, Backend>(static_cast<const tensor<float>&>(t));
}

// Rows of a and b stacked: (ra + rb, n). Fuses two projections of the same input into one GEMM.
inline tensor<float> stack_rows(const tensor<float>& a, const tensor<float>& b) {
    LOCOST_ASSERT(a.dim(1) == b.dim(1));
    tensor<float> out({a.dim(0) + b.dim(0), a.dim(1)});
    prefault_pages(out.data(), static_cast<std::size_t>(out.numel()) * sizeof(float));
    std::memcpy(out.data(), a.data(), static_cast<std::size_t>(a.numel()) * sizeof(float));
    std::memcpy(out.data() + a.numel(), b.data(), static_cast<std::size_t>(b.numel()) * sizeof(float));
    return out;
}

// A growable scratch buffer (contents not kept when it grows).
template <class T>
class scratch_buffer {
public:
    T* get(index_t n) {
        if (n > size_) {
            data_ = aligned_alloc_n<T>(static_cast<std::size_t>(n));
            size_ = n;
        }
        return data_.get();
    }
    void release() {
        data_.reset();
        size_ = 0;
    }

private:
    aligned_ptr<T> data_;
    index_t size_ = 0;
};

} // namespace locost::layers
