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
#include "isa.hpp"

#ifdef LOCOST_USE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace locost::cpu_detail {

// Rows rounded per block: the bfloat16 copy of x stays small (1024 × 2048 × 2 B = 4 MB) however
// many rows come (the cross-attention cache's projection of a whole book).
inline constexpr index_t bf16_block_rows = 1024;

// oneDNN's matmuls are called with a multiple of this many rows, the last block padded with zero
// rows. Why: the AMX kernels of Debian 12's oneDNN (2.6) run some row counts 4-10x slower than
// their neighbours (bm_gemm on a Xeon family 6 model 207, int8 · 768 x 1536: 682 rows at 160
// GOP/s, 683 at 793; 106 rows at 92, 128 at 745), with no pattern in the count but never, in a
// sweep of every shape of the base models, at a multiple of 64 (bench/RESULTS.md, "oneDNN's AMX
// matmul"). Padding costs at most 63 rows of products a call.
inline constexpr index_t onednn_row_multiple = 64;
inline constexpr index_t onednn_rows(index_t rows) { return (rows + onednn_row_multiple - 1) / onednn_row_multiple * onednn_row_multiple; }

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

#if LOCOST_ISA_REGIONS
LOCOST_BEGIN_ISA_AVX512
// float_to_bf16 of 16 floats at once.
inline __m256i bf16_bits(__m512 x) {
    const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff), quiet = _mm512_set1_epi32(0x40);
    const __m512i u = _mm512_castps_si512(x);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(half, _mm512_and_si512(_mm512_srli_epi32(u, 16), one))), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), quiet);
    return _mm512_cvtepi32_epi16(r);
}

inline index_t round_to_bf16_avx512(const float* src, index_t n, std::uint16_t* dst) {
    index_t k = 0;
    for (; k + 16 <= n; k += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k), bf16_bits(_mm512_loadu_ps(src + k)));
    return k;
}
LOCOST_END_ISA
#endif

// dst[0, n) = bfloat16(src[0, n)) as float_to_bf16 rounds (nearest even; NaN stays NaN), sixteen
// at a time at the avx512 level.
inline void round_to_bf16(const float* src, index_t n, std::uint16_t* dst) {
    index_t k = 0;
#if LOCOST_ISA_REGIONS
    if (isa_at_least(isa_level::avx512)) k = round_to_bf16_avx512(src, n, dst);
#endif
    for (; k < n; ++k) dst[k] = float_to_bf16(src[k]);
}

#ifdef LOCOST_USE_ONEDNN
// oneDNN matmul primitives by input type (bfloat16 with float32 results, or int8 with int32
// results), shape (rows, out, in, ldy, accumulate, alpha) and thread count, created once each:
// an encoder's tiles repeat a handful of shapes, and creating one costs far more than a lookup.
// The thread count is part of the key because a primitive plans its work for the OpenMP threads
// available when it is created (one made on one thread stays on one). Each primitive's scratch
// (oneDNN's packed copies of the weights, among others) is the calling thread's own: the
// attention's products run one per thread at once, and Debian's oneDNN shares one library-managed
// scratchpad between primitives unless built for concurrent execution (it is not).
class onednn_products {
public:
    static onednn_products& instance() {
        static onednn_products p;
        return p;
    }
    // y (rows, out) = alpha · x·Wᵀ [+ y], bfloat16 inputs. False when oneDNN has no bfloat16
    // matmul for this machine (then the caller falls back).
    bool run(const std::uint16_t* x, index_t rows, const ops::weight_view& w, float* y, index_t ldy, float alpha, bool accumulate) {
        return execute(dnnl::memory::data_type::bf16, x, rows, w, y, ldy, alpha, accumulate, false);
    }
    // The same with W stored transposed: (in, out) row-major, W's columns are the outputs (the
    // values of an attention, V (keys, d), for O = P·V).
    bool run_in_rows(const std::uint16_t* x, index_t rows, const ops::weight_view& w, float* y, index_t ldy) {
        return execute(dnnl::memory::data_type::bf16, x, rows, w, y, ldy, 1.0f, false, true);
    }
    // acc (rows, out) = x·Wᵀ in int32, int8 inputs (W's scales not applied). False as above, and
    // where the CPU has no int8 dot-product instruction (VNNI, or AMX): there oneDNN multiplies
    // with vpmaddubsw, whose 16-bit sum of two products saturates (255·127·2 > 32767), and the
    // sums are not exact (0.3 of the largest output off on a Zen 3 core); the caller's exact
    // fallback then runs instead.
    bool run(const std::int8_t* x, index_t rows, const ops::weight_view& w, std::int32_t* acc, index_t ldacc) {
        if (!exact_int8()) return false;
        return execute(dnnl::memory::data_type::s8, x, rows, w, acc, ldacc, 1.0f, false, false);
    }
    // Whether oneDNN's int8 products are exact here: dnnl_cpu_isa_t's VNNI bits (avx512_core_vnni
    // 0x40, avx2_vnni 0x400; bfloat16 and AMX levels include the first).
    static bool exact_int8() {
        static const bool v = (static_cast<unsigned>(dnnl_get_effective_cpu_isa()) & 0x440u) != 0;
        return v;
    }

private:
    onednn_products() : engine_(dnnl::engine::kind::cpu, 0) {}

    bool execute(dnnl::memory::data_type in, const void* x, index_t rows, const ops::weight_view& w, void* y, index_t ldy, float alpha,
                 bool accumulate, bool in_rows) {
        const std::shared_ptr<const entry> mm = primitive(in, rows, w.out, w.in, ldy, accumulate, alpha, in_rows);
        if (!mm) return false;
        using dnnl::memory;
        const memory::desc a({rows, w.in}, in, memory::dims{w.in, 1});
        const memory::desc b({w.in, w.out}, in, in_rows ? memory::dims{w.out, 1} : memory::dims{1, w.in});
        const memory::desc c({rows, w.out}, out_type(in), memory::dims{ldy, 1});
        memory am(a, engine_, const_cast<void*>(x)), bm(b, engine_, const_cast<void*>(w.data)), cm(c, engine_, y);
        thread_local growing_buffer<std::uint8_t> scratch;
        memory sm(mm->scratch, engine_, scratch.at_least(std::max<std::size_t>(mm->scratch.get_size(), 1)));
        dnnl::stream s(engine_);
        mm->matmul.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}, {DNNL_ARG_SCRATCHPAD, sm}});
        s.wait();
        return true;
    }
    struct entry {
        dnnl::matmul matmul;
        dnnl::memory::desc scratch;
    };
    static dnnl::memory::data_type out_type(dnnl::memory::data_type in) {
        return in == dnnl::memory::data_type::s8 ? dnnl::memory::data_type::s32 : dnnl::memory::data_type::f32;
    }

    // Shared ownership: another thread may drop the cache while this one still runs its primitive.
    std::shared_ptr<const entry> primitive(dnnl::memory::data_type in, index_t M, index_t N, index_t K, index_t ldy, bool accumulate,
                                           float alpha, bool in_rows) {
        std::uint32_t alpha_bits;
        std::memcpy(&alpha_bits, &alpha, 4);
        const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
        const auto key = std::make_tuple(static_cast<int>(in), M, N, K, ldy, accumulate, alpha_bits, threads, in_rows);
        const std::lock_guard<std::mutex> lock(mutex_);
        if (unavailable_.count(static_cast<int>(in))) return nullptr;
        if (auto it = cache_.find(key); it != cache_.end()) return it->second;
        if (cache_.size() >= 64) cache_.clear();  // shapes of past inputs; a new input rebuilds its few
        using dnnl::memory;
        const memory::desc a({M, K}, in, memory::dims{K, 1});
        const memory::desc b({K, N}, in, in_rows ? memory::dims{N, 1} : memory::dims{1, K});
        const memory::desc c({M, N}, out_type(in), memory::dims{ldy, 1});
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
        if (accumulate) {
            dnnl::post_ops ops;
            ops.append_sum(1.0f);
            attr.set_post_ops(ops);
        }
        try {
            const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine_);
            return cache_.emplace(key, std::make_shared<const entry>(entry{dnnl::matmul(pd), pd.scratchpad_desc()})).first->second;
        } catch (const dnnl::error&) {
            unavailable_.insert(static_cast<int>(in));  // no such matmul on this ISA (oneDNN 2.x: bfloat16 needs AVX-512)
            return nullptr;
        }
    }

    dnnl::engine engine_;
    std::mutex mutex_;
    std::map<std::tuple<int, index_t, index_t, index_t, index_t, bool, std::uint32_t, int, bool>, std::shared_ptr<const entry>> cache_;
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
        // Whole multiples of onednn_row_multiple straight into y; a last part of fewer rows
        // padded with zero rows into a scratch of its own, then into y.
        const index_t padded = onednn_rows(block);
        const auto xb = aligned_alloc_n<std::uint16_t>(static_cast<std::size_t>(padded * w.in));
        aligned_ptr<float> tail;
        while (r0 < rows) {
            index_t n = std::min(block, rows - r0);
            if (n >= onednn_row_multiple) n -= n % onednn_row_multiple;
            round_rows(x + r0 * ldx, ldx, n, w.in, xb.get(), [](float v) { return float_to_bf16(v); });  // inlined: vectorised
            if (n % onednn_row_multiple == 0) {
                if (!onednn_products::instance().run(xb.get(), n, w, y + r0 * ldy, ldy, alpha, accumulate)) break;
            } else {
                std::fill(xb.get() + n * w.in, xb.get() + onednn_row_multiple * w.in, std::uint16_t{0});
                if (!tail) tail = aligned_alloc_n<float>(static_cast<std::size_t>(onednn_row_multiple * w.out));
                if (!onednn_products::instance().run(xb.get(), onednn_row_multiple, w, tail.get(), w.out, alpha, false)) break;
                for (index_t r = 0; r < n; ++r) {
                    const float* src = tail.get() + r * w.out;
                    float* dst = y + (r0 + r) * ldy;
                    if (accumulate) {
                        for (index_t o = 0; o < w.out; ++o) dst[o] += src[o];
                    } else {
                        std::copy(src, src + w.out, dst);
                    }
                }
            }
            r0 += n;
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

}  // namespace locost::cpu_detail
