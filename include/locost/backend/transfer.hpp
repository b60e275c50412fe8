// Crossing between host memory and a backend's memory, the way model code asks for it. These are
// the only places outside a backend's own files that ask whether the host can touch a backend's
// memory (is_host): on the host every crossing is a view or a move, on a device it is one
// upload or download, so layers and models read the same on both.
//
//   to_backend<Scalar, Backend>(t)      float32 weights from a checkpoint → the layer's storage
//   move_to_backend<Backend>(t)         a host tensor of any type handed over (kept on the host)
//   backend_array<T, Backend>           input metadata (ids, a mask, an index list) where a
//                                       backend's ops can read it: a view on the host, a copy on
//                                       a device
//   host_copy(t), host_tensor(t&&)      a backend tensor's values on the host (the second moves a
//                                       host tensor instead of copying it)
//   host_output<T, Backend>             a result the host reads (logits): computed in place on
//                                       the host, in device scratch and downloaded once elsewhere
//   release_consumed<Backend>(p, n)     pages of a consumed host buffer go back to the system
//                                       (a device frees its buffers whole)
#pragma once
#include <cstring>
#include <type_traits>
#include <vector>

#include "../core/aligned.hpp"
#include "../core/tensor.hpp"
#include "backend.hpp"

namespace locost {

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

// Host data (token ids, a mask, an index list) where a backend's ops can read it: a view of the
// host array on the host, a device copy elsewhere. The host array must outlive the view.
template <class T, class Backend>
class backend_array {
public:
    backend_array() = default;
    backend_array(const T* host, index_t n) : host_(host) {
        if constexpr (!is_host<Backend>) {
            if (host && n) {
                copy_ = tensor<T, Backend>({n});
                transfer<Backend>::upload(copy_.data(), host, static_cast<std::size_t>(n));
            }
        }
    }
    explicit backend_array(const std::vector<T>& v) : backend_array(v.data(), static_cast<index_t>(v.size())) {}
    const T* data() const noexcept {
        if constexpr (is_host<Backend>) return host_;
        else return host_ ? copy_.data() : nullptr;
    }

private:
    const T* host_ = nullptr;
    tensor<T, Backend> copy_;
};

// A backend tensor's values in host memory (a copy).
template <class T, class Backend>
tensor<T> host_copy(const tensor<T, Backend>& t) {
    if constexpr (is_host<Backend>) {
        return t.clone();
    } else {
        tensor<T> host(t.shape());
        transfer<Backend>::download(host.data(), t.data(), static_cast<std::size_t>(t.numel()));
        return host;
    }
}

// A tensor the caller gives up, on the host: moved there when it is already, downloaded otherwise.
template <class T, class Backend>
tensor<T> host_tensor(tensor<T, Backend>&& t) {
    if constexpr (is_host<Backend>) return std::move(t);
    else return host_copy(t);
}

// A result of n values that the host reads at `dst`: the backend's ops write to data() — dst
// itself on the host, a device buffer from `scratch` elsewhere — and finish() brings it home.
template <class T, class Backend, class Scratch>
class host_output {
public:
    host_output(T* dst, index_t n, Scratch& scratch) : dst_(dst), n_(n) {
        if constexpr (is_host<Backend>) out_ = dst;
        else out_ = scratch.get(n);
    }
    T* data() const noexcept { return out_; }
    void finish() const {
        if constexpr (!is_host<Backend>) transfer<Backend>::download(dst_, out_, static_cast<std::size_t>(n_));
    }

private:
    T* dst_;
    T* out_;
    index_t n_;
};

// The first `bytes` of a host buffer are consumed and will not be read again: their pages go
// back to the system while the rest is still in use (a 700K-token encoder output handed to the
// cross-attention cache tile by tile). A device frees its buffers whole, later.
template <class Backend>
void release_consumed(void* p, std::size_t bytes) noexcept {
    if constexpr (is_host<Backend>) release_pages(p, bytes);
}

}  // namespace locost
