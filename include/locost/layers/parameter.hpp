// Moving weights from a checkpoint (float32 on the host) into the storage a layer computes
// with: the layer's scalar type on the layer's backend. The one place that converts.
#pragma once
#include <cstring>
#include <vector>

#include "../core/tensor.hpp"

namespace locost::layers {

template <class Scalar, class Backend>
tensor<Scalar, Backend> to_backend(const tensor<float>& t) {
    if constexpr (is_host<Backend>) {
        tensor<Scalar, Backend> out(t.shape());
        prefault_pages(out.data(), static_cast<std::size_t>(out.numel()) * sizeof(Scalar));
        if constexpr (std::is_same_v<Scalar, float>) {
            if (t.numel()) std::memcpy(out.data(), t.data(), static_cast<std::size_t>(t.numel()) * sizeof(float));
        } else {
            for (index_t i = 0; i < t.numel(); ++i) out[i] = static_cast<Scalar>(t[i]);
        }
        return out;
    } else {
        // Converted on the host, then one upload (the only host-to-device crossing of a weight).
        tensor<Scalar, Backend> out(t.shape());
        if constexpr (std::is_same_v<Scalar, float>) {
            transfer<Backend>::upload(out.data(), t.data(), static_cast<std::size_t>(t.numel()));
        } else {
            const tensor<Scalar> host = to_backend<Scalar, cpu>(t);
            transfer<Backend>::upload(out.data(), host.data(), static_cast<std::size_t>(t.numel()));
        }
        return out;
    }
}

// The same for a tensor the caller gives up: float32 on the host is kept as it is (no copy).
template <class Scalar, class Backend>
tensor<Scalar, Backend> to_backend(tensor<float>&& t) {
    if constexpr (std::is_same_v<Scalar, float> && std::is_same_v<Backend, cpu>) return std::move(t);
    else return to_backend<Scalar, Backend>(static_cast<const tensor<float>&>(t));
}

// A host tensor of any element type handed to a backend: kept as it is on the host, uploaded
// once to a device.
template <class Backend, class T>
tensor<T, Backend> move_to_backend(tensor<T>&& t) {
    if constexpr (is_host<Backend>) {
        return std::move(t);
    } else {
        tensor<T, Backend> out(t.shape());
        transfer<Backend>::upload(out.data(), t.data(), static_cast<std::size_t>(t.numel()));
        return out;
    }
}

// Host data (token ids, a mask) where a backend's ops can read it: a view of the host array on
// the host, a device copy elsewhere.
template <class T, class Backend>
class backend_array {
public:
    backend_array(const T* host, index_t n) : host_(host) {
        if constexpr (!is_host<Backend>) {
            if (host && n) {
                copy_ = tensor<T, Backend>({n});
                transfer<Backend>::upload(copy_.data(), host, static_cast<std::size_t>(n));
            }
        }
    }
    const T* data() const noexcept {
        if constexpr (is_host<Backend>) return host_;
        else return host_ ? copy_.data() : nullptr;
    }

private:
    const T* host_;
    tensor<T, Backend> copy_;
};

// Values the host computes for a buffer in a backend's memory (a bias block, a key mask): written
// in place on the host backend; elsewhere staged in host memory and uploaded once by commit().
template <class T, class Backend>
class host_written {
public:
    host_written(T* dst, index_t n) : dst_(dst), n_(n) {
        if constexpr (!is_host<Backend>) staged_.resize(static_cast<std::size_t>(n));
    }
    T* data() noexcept {
        if constexpr (is_host<Backend>) return dst_;
        else return staged_.data();
    }
    void commit() {
        if constexpr (!is_host<Backend>) transfer<Backend>::upload(dst_, staged_.data(), static_cast<std::size_t>(n_));
    }

private:
    T* dst_;
    index_t n_;
    std::vector<T> staged_;
};

// Rows of a and b stacked: (ra + rb, n). Fuses two projections of the same input into one GEMM.
inline tensor<float> stack_rows(const tensor<float>& a, const tensor<float>& b) {
    LOCOST_ASSERT(a.dim(1) == b.dim(1));
    tensor<float> out({a.dim(0) + b.dim(0), a.dim(1)});
    prefault_pages(out.data(), static_cast<std::size_t>(out.numel()) * sizeof(float));
    std::memcpy(out.data(), a.data(), static_cast<std::size_t>(a.numel()) * sizeof(float));
    std::memcpy(out.data() + a.numel(), b.data(), static_cast<std::size_t>(b.numel()) * sizeof(float));
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

} // namespace locost::layers
