// Many-row products for weight_precision::bf16_products (ops/linear.hpp): x is rounded to
// bfloat16 (nearest even) a block of rows at a time, and the block is multiplied by the stored
// bfloat16 weights with float32 sums.
//
// With LOCOST_USE_ONEDNN the product is oneDNN's matmul (Debian libdnnl-dev), which picks the
// machine's bfloat16 instructions at run time (AVX512-BF16's dot products, AMX tiles) and runs
// at twice OpenBLAS's float32 rate on a Zen 4 core (bench/RESULTS.md, "bfloat16 encoder
// products"). Writing such a kernel ourselves would mean a packed-panel GEMM per ISA; oneDNN's is
// maintained by the vendor that designed the instructions. Without oneDNN, or where it has no
// bfloat16 kernel for the machine, the same numbers (up to summation order) come from widening
// the weights and float32 GEMM: correct everywhere, fast only with oneDNN.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>

#include "../../core/aligned.hpp"
#include "../../core/dtype.hpp"
#include "../../ops/linear.hpp"

#ifdef LOCOST_USE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace locost::cpu_detail {

// Rows rounded per block: the bfloat16 copy of x stays small (1024 × 2048 × 2 B = 4 MB) however
// many rows come (the cross-attention cache's projection of a whole book).
inline constexpr index_t bf16_block_rows = 1024;

// dst[r, k] = bfloat16(x[r, k]) for a block of rows, on the OpenMP threads when worth it.
template <class Out, class Convert>
void round_rows(const float* x, index_t ldx, index_t rows, index_t in, Out* dst, Convert convert) {
    const bool parallel = !omp_in_parallel() && rows * in >= (index_t{1} << 16);
#pragma omp parallel for schedule(static) if (parallel)
    for (index_t r = 0; r < rows; ++r) {
        const float* src = x + r * ldx;
        Out* out = dst + r * in;
        for (index_t k = 0; k < in; ++k) out[k] = convert(src[k]);
    }
}

#ifdef LOCOST_USE_ONEDNN
// oneDNN matmul primitives by input type (bfloat16 with float32 results, or int8 with int32
// results), shape (rows, out, in, ldy, accumulate, alpha) and thread count, created once each:
// an encoder's tiles repeat a handful of shapes, and creating one costs far more than a lookup.
// The thread count is part of the key because a primitive plans its work for the OpenMP threads
// available when it is created (one made on one thread stays on one).
class onednn_products {
public:
    static onednn_products& instance() {
        static onednn_products p;
        return p;
    }
    // y (rows, out) = alpha · x·Wᵀ [+ y], bfloat16 inputs. False when oneDNN has no bfloat16
    // matmul for this machine (then the caller falls back).
    bool run(const std::uint16_t* x, index_t rows, const ops::weight_view& w, float* y, index_t ldy, float alpha, bool accumulate) {
        return execute(dnnl::memory::data_type::bf16, x, rows, w, y, ldy, alpha, accumulate);
    }
    // acc (rows, out) = x·Wᵀ in int32, int8 inputs (W's scales not applied). False as above.
    bool run(const std::int8_t* x, index_t rows, const ops::weight_view& w, std::int32_t* acc, index_t ldacc) {
        return execute(dnnl::memory::data_type::s8, x, rows, w, acc, ldacc, 1.0f, false);
    }

private:
    onednn_products() : engine_(dnnl::engine::kind::cpu, 0) {}

    bool execute(dnnl::memory::data_type in, const void* x, index_t rows, const ops::weight_view& w, void* y, index_t ldy, float alpha,
                 bool accumulate) {
        const std::shared_ptr<dnnl::matmul> mm = primitive(in, rows, w.out, w.in, ldy, accumulate, alpha);
        if (!mm) return false;
        using dnnl::memory;
        const memory::desc a({rows, w.in}, in, memory::dims{w.in, 1});
        const memory::desc b({w.in, w.out}, in, memory::dims{1, w.in});
        const memory::desc c({rows, w.out}, out_type(in), memory::dims{ldy, 1});
        memory am(a, engine_, const_cast<void*>(x)), bm(b, engine_, const_cast<void*>(w.data)), cm(c, engine_, y);
        dnnl::stream s(engine_);
        mm->execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
        s.wait();
        return true;
    }
    static dnnl::memory::data_type out_type(dnnl::memory::data_type in) {
        return in == dnnl::memory::data_type::s8 ? dnnl::memory::data_type::s32 : dnnl::memory::data_type::f32;
    }

    // Shared ownership: another thread may drop the cache while this one still runs its primitive.
    std::shared_ptr<dnnl::matmul> primitive(dnnl::memory::data_type in, index_t M, index_t N, index_t K, index_t ldy, bool accumulate,
                                            float alpha) {
        std::uint32_t alpha_bits;
        std::memcpy(&alpha_bits, &alpha, 4);
        const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
        const auto key = std::make_tuple(static_cast<int>(in), M, N, K, ldy, accumulate, alpha_bits, threads);
        const std::lock_guard<std::mutex> lock(mutex_);
        if (unavailable_.count(static_cast<int>(in))) return nullptr;
        if (auto it = cache_.find(key); it != cache_.end()) return it->second;
        if (cache_.size() >= 64) cache_.clear();  // shapes of past inputs; a new input rebuilds its few
        using dnnl::memory;
        const memory::desc a({M, K}, in, memory::dims{K, 1});
        const memory::desc b({K, N}, in, memory::dims{1, K});
        const memory::desc c({M, N}, out_type(in), memory::dims{ldy, 1});
        dnnl::primitive_attr attr;
        if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
        if (accumulate) {
            dnnl::post_ops ops;
            ops.append_sum(1.0f);
            attr.set_post_ops(ops);
        }
        try {
            const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine_);
            return cache_.emplace(key, std::make_shared<dnnl::matmul>(pd)).first->second;
        } catch (const dnnl::error&) {
            unavailable_.insert(static_cast<int>(in));  // no such matmul on this ISA (oneDNN 2.x: bfloat16 needs AVX-512)
            return nullptr;
        }
    }

    dnnl::engine engine_;
    std::mutex mutex_;
    std::map<std::tuple<int, index_t, index_t, index_t, index_t, bool, std::uint32_t, int>, std::shared_ptr<dnnl::matmul>> cache_;
    std::set<int> unavailable_;
};
#endif

// The float32 fallback's product of rows already rounded to bfloat16 values: linear_reduced's
// many-row path (defined in linear.hpp, which includes this file first).
template <class Stored>
void linear_reduced(const ops::weight_view& w, const float* x, index_t ldx, index_t rows, float* y, index_t ldy, float alpha,
                    bool accumulate);

// y (rows, out) = alpha · bf16(x)·Wᵀ [+ y] for W stored bfloat16, rows > the fused kernel's.
inline void bf16_products(const ops::weight_view& w, const float* x, index_t ldx, index_t rows, float* y, index_t ldy, float alpha,
                          bool accumulate) {
    const index_t block = std::min(rows, bf16_block_rows);
    index_t r0 = 0;  // rows done
#ifdef LOCOST_USE_ONEDNN
    {
        const auto xb = aligned_alloc_n<std::uint16_t>(static_cast<std::size_t>(block * w.in));
        for (; r0 < rows; r0 += block) {
            const index_t n = std::min(block, rows - r0);
            round_rows(x + r0 * ldx, ldx, n, w.in, xb.get(), [](float v) { return float_to_bf16(v); });  // inlined: vectorised
            if (!onednn_products::instance().run(xb.get(), n, w, y + r0 * ldy, ldy, alpha, accumulate)) break;
        }
        if (r0 >= rows) return;
    }
#endif
    // The rest (all of it without a oneDNN bfloat16 kernel) through float32 GEMM.
    const auto xr = aligned_alloc_n<float>(static_cast<std::size_t>(block * w.in));
    for (; r0 < rows; r0 += block) {
        const index_t n = std::min(block, rows - r0);
        round_rows(x + r0 * ldx, ldx, n, w.in, xr.get(), [](float v) { return bf16_to_float(float_to_bf16(v)); });
        linear_reduced<std::uint16_t>(w, xr.get(), w.in, n, y + r0 * ldy, ldy, alpha, accumulate);
    }
}

} // namespace locost::cpu_detail
