// One document's cross-attention keys and values for one layer (cross_kv), in memory of any
// backend (backend_bytes): the data every decoder keeps per document, on its own so that the
// public API's light headers (locost/api.hpp) can hold an encoded document. What fills and reads
// it is in layers/kv_cache.hpp, which also defines the member templates declared here.
#pragma once
#include <cstddef>
#include <memory>

#include "../core/index.hpp"
#include "../ops/precision.hpp"

namespace locost::layers {

// Bytes in some backend's memory with that backend erased, so a cross_kv (and a document) is one
// type whatever backend holds it: the owner frees them through memory<Backend>.
class backend_bytes {
public:
    template <class Backend>
    static backend_bytes allocate(std::size_t n);  // layers/kv_cache.hpp
    std::byte* get() const noexcept { return data_; }

private:
    std::shared_ptr<void> owner_;
    std::byte* data_ = nullptr;
};

// Cross-attention keys and values of one document for one layer, head-major:
// (heads, L, d_kv) each, in the chosen precision (int8 with one scale per (head, position)).
// Or, for folded cross-attention, the document's encoder states themselves (states = true:
// one "head" of width d_model, stored once for every layer, serving as keys and as values).
struct cross_kv {
    ops::kv_precision precision = ops::kv_precision::f32;
    index_t heads = 0, length = 0, d = 0;
    bool states = false;
    backend_bytes k, v;              // in the memory of the decoder's backend
    backend_bytes k_scale, v_scale;  // float (heads, L), int8 only

    static std::size_t element_size(ops::kv_precision p) {
        return p == ops::kv_precision::f32 ? 4 : p == ops::kv_precision::bf16 ? 2 : 1;  // never native
    }
    std::size_t bytes() const {
        const std::size_t n = static_cast<std::size_t>(heads * length * d), m = states ? 1 : 2;
        return m * n * element_size(precision) +
            (precision == ops::kv_precision::i8 ? m * static_cast<std::size_t>(heads * length) * 4 : 0);
    }
    // n_heads × L rows of width d_kv, keys and values, in Backend's memory (layers/kv_cache.hpp).
    template <class Backend>
    void allocate(ops::kv_precision p, index_t n_heads, index_t L, index_t d_kv);
    // L encoder states of width H (folded cross-attention): keys and values are these rows.
    template <class Backend>
    void allocate_states(ops::kv_precision p, index_t L, index_t H);
    ops::kv_matrix key(index_t h) const { return matrix(k.get(), scales(k_scale), h); }
    ops::kv_matrix value(index_t h) const { return states ? key(h) : matrix(v.get(), scales(v_scale), h); }

    // Stores rows [j0, j0 + n) of a (n, heads·d) projection (in Backend's memory, like this
    // cache) into key (which = 0) or value storage (layers/kv_cache.hpp).
    template <class Backend, class Scalar>
    void store(int which, index_t j0, index_t n, const Scalar* src, index_t ld);

private:
    static float* scales(const backend_bytes& b) noexcept { return reinterpret_cast<float*>(b.get()); }
    ops::kv_matrix matrix(const std::byte* base, const float* scale, index_t h) const {
        ops::kv_matrix m;
        m.precision = precision;
        m.data = base + static_cast<std::size_t>(h * length * d) * element_size(precision);
        m.scale = scale ? scale + h * length : nullptr;
        m.ld = d;
        return m;
    }
};

}  // namespace locost::layers
