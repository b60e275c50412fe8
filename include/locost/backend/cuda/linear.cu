// Linear layers on the GPU, y = alpha·x·Wᵀ [+ y], for every storage of W (ops/linear.hpp states
// the contract and the CPU's numbers; these are the same numbers up to float32 summation order):
//
//   native         cuBLAS's GEMM (gemm.cu).
//   bf16, i8       storage only. A few rows (≤ ops::linear_few_rows: a decoding step's
//                  hypotheses) run one warp per output channel, which reads the channel's stored
//                  weights once (eight at a time), widens them exactly in registers and multiplies
//                  them into every row's float32 sum: a step reads the stored bytes, half or a
//                  quarter of float32's. More rows widen blocks of channels (int8: times their
//                  scales) into float32 scratch for cuBLAS's SGEMM.
//   bf16_products  more rows: x rounded to bfloat16, cublasGemmEx with float32 sums (tensor
//                  cores). A few rows as bf16.
//   i8_products    more rows: each row of x quantized to int8 with its own scale by the CPU's rule
//                  (the same bytes), cublasGemmEx int8 × int8 with exact int32 sums, the sums
//                  scaled by s_r·scale[o]. cuBLAS takes int8 products only for row lengths that
//                  are multiples of 4; other lengths widen q to float32 for SGEMM (exact, as the
//                  CPU's fallback). A few rows as i8.
//
// Scratch comes per call from the caching allocator, at most cuda_workspace::linear_scratch_bytes:
// larger products run in slices of rows or of channels.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "runtime.cuh"
#include "workspace.hpp"

namespace locost {

namespace cuda_detail {

inline constexpr int linear_threads = 256;  // threads per block of every kernel here
inline constexpr int linear_warps = linear_threads / 32;

// Every kernel here strides over its items by the grid, so the grid is capped: 2048 blocks of 256
// threads fill an H100 (132 multiprocessors) about twice over.
inline unsigned linear_grid(index_t items, index_t per_block) {
    return static_cast<unsigned>(std::clamp<index_t>((items + per_block - 1) / per_block, 1, 2048));
}

__device__ inline float widen_weight(std::uint16_t v) { return __uint_as_float(static_cast<unsigned>(v) << 16); }
__device__ inline float widen_weight(std::int8_t v) { return static_cast<float>(v); }

// Eight stored weights from one aligned load (16 bytes of bfloat16, 8 of int8), widened; element
// i of the eight is at byte i·sizeof(Stored) (little-endian words).
__device__ inline void widen_eight(const std::uint16_t* p, float (&w)[8]) {
    const uint4 v = load_vector<uint4>(p);
    const unsigned u[4] = {v.x, v.y, v.z, v.w};
    for (int i = 0; i < 4; ++i) {
        w[2 * i] = __uint_as_float(u[i] << 16);
        w[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
    }
}
__device__ inline void widen_eight(const std::int8_t* p, float (&w)[8]) {
    const uint2 v = load_vector<uint2>(p);
    const unsigned u[2] = {v.x, v.y};
    for (int i = 0; i < 2; ++i)
        for (int b = 0; b < 4; ++b) w[4 * i + b] = static_cast<float>(static_cast<signed char>((u[i] >> (8 * b)) & 0xffu));
}

__device__ inline float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ inline float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// R rows against stored weights: a warp per output channel o (striding by the grid's warps).
// Lanes take eight weights at a time where `vectors` says every row of W starts 16-byte aligned
// and holds a multiple of eight (else one at a time), and the remainder one at a time.
template <class Stored, int R>
__global__ void linear_few_rows_kernel(const Stored* W, const float* scale, index_t out, index_t in, bool vectors, const float* x,
                                       index_t ldx, float* y, index_t ldy, float alpha, bool accumulate) {
    const int lane = static_cast<int>(threadIdx.x % 32);
    const index_t in8 = vectors ? in / 8 * 8 : 0;
    // o is the same for the whole warp, so its lanes leave the loop together (the shuffles need all 32).
    for (index_t o = static_cast<index_t>(blockIdx.x) * linear_warps + threadIdx.x / 32; o < out;
         o += static_cast<index_t>(gridDim.x) * linear_warps) {
        const Stored* row = W + o * in;
        float s[R];
        for (int r = 0; r < R; ++r) s[r] = 0.0f;
        for (index_t k = 8 * static_cast<index_t>(lane); k < in8; k += 8 * 32) {
            float w[8];
            widen_eight(row + k, w);
            for (int r = 0; r < R; ++r) {
                const float* xr = x + r * ldx + k;
                for (int i = 0; i < 8; ++i) s[r] = fmaf(xr[i], w[i], s[r]);
            }
        }
        for (index_t k = in8 + lane; k < in; k += 32) {
            const float w = widen_weight(row[k]);
            for (int r = 0; r < R; ++r) s[r] = fmaf(x[r * ldx + k], w, s[r]);
        }
        for (int r = 0; r < R; ++r) s[r] = warp_sum(s[r]);
        if (lane == 0) {
            const float a = alpha * (scale ? scale[o] : 1.0f);
            for (int r = 0; r < R; ++r) {
                float& dst = y[r * ldy + o];
                dst = accumulate ? dst + a * s[r] : a * s[r];
            }
        }
    }
}

// out (channels, in) = the stored rows widened, each times its channel's scale (int8).
template <class Stored>
__global__ void widen_rows_kernel(const Stored* W, const float* scale, index_t channels, index_t in, float* out) {
    const index_t count = channels * in;
    for (index_t i = blockIdx.x * static_cast<index_t>(linear_threads) + threadIdx.x; i < count;
         i += static_cast<index_t>(gridDim.x) * linear_threads)
        out[i] = widen_weight(W[i]) * (scale ? scale[i / in] : 1.0f);
}

// xb (rows, cols) = x rounded to bfloat16 (nearest even).
__global__ void round_to_bf16_kernel(const float* x, index_t ldx, index_t rows, index_t cols, __nv_bfloat16* xb) {
    const index_t count = rows * cols;
    for (index_t i = blockIdx.x * static_cast<index_t>(linear_threads) + threadIdx.x; i < count;
         i += static_cast<index_t>(gridDim.x) * linear_threads)
        xb[i] = __float2bfloat16_rn(x[(i / cols) * ldx + i % cols]);
}

// A warp per row: s[r] = max|x[r, :]|/127 and q[r, :] = round(x[r, :]·127/max|x[r, :]|), nearest
// even, the CPU's quantize_row to the bit (IEEE division and product, no contraction).
__global__ void quantize_rows_kernel(const float* x, index_t ldx, index_t rows, index_t cols, std::int8_t* q, float* s) {
    const int lane = static_cast<int>(threadIdx.x % 32);
    for (index_t r = static_cast<index_t>(blockIdx.x) * linear_warps + threadIdx.x / 32; r < rows;
         r += static_cast<index_t>(gridDim.x) * linear_warps) {
        const float* xr = x + r * ldx;
        float m = 0.0f;
        for (index_t k = lane; k < cols; k += 32) m = max(m, fabsf(xr[k]));
        m = warp_max(m);
        const float inv = m > 0.0f ? __fdiv_rn(127.0f, m) : 0.0f;
        if (lane == 0) s[r] = m > 0.0f ? __fdiv_rn(m, 127.0f) : 0.0f;
        for (index_t k = lane; k < cols; k += 32)
            q[r * cols + k] = static_cast<std::int8_t>(min(max(__float2int_rn(__fmul_rn(xr[k], inv)), -127), 127));
    }
}

__global__ void widen_int8_kernel(const std::int8_t* q, index_t count, float* out) {
    for (index_t i = blockIdx.x * static_cast<index_t>(linear_threads) + threadIdx.x; i < count;
         i += static_cast<index_t>(gridDim.x) * linear_threads)
        out[i] = static_cast<float>(q[i]);
}

// y[r, o] = alpha·s[r]·col[o]·sums[r, o] [+ y[r, o]] (col: nullptr for none), in the CPU's order.
template <class Acc>
__global__ void scale_sums_kernel(const Acc* sums, const float* row_scale, const float* col_scale, index_t rows, index_t out, float* y,
                                  index_t ldy, float alpha, bool accumulate) {
    const index_t count = rows * out;
    for (index_t i = blockIdx.x * static_cast<index_t>(linear_threads) + threadIdx.x; i < count;
         i += static_cast<index_t>(gridDim.x) * linear_threads) {
        const index_t r = i / out, o = i % out;
        const float v = __fmul_rn(__fmul_rn(__fmul_rn(alpha, row_scale[r]), col_scale ? col_scale[o] : 1.0f), static_cast<float>(sums[i]));
        float& dst = y[r * ldy + o];
        dst = accumulate ? dst + v : v;
    }
}

template <class Stored, int R = 1>
void few_rows(index_t rows, const ops::weight_view& w, const float* x, index_t ldx, float* y, index_t ldy, float alpha, bool accumulate) {
    if constexpr (R < ops::linear_few_rows) {
        if (rows != R) return few_rows<Stored, R + 1>(rows, w, x, ldx, y, ldy, alpha, accumulate);
    }
    const bool vectors = w.in % 8 == 0 && reinterpret_cast<std::uintptr_t>(w.data) % 16 == 0;
    launch(linear_few_rows_kernel<Stored, R>, linear_grid(w.out, linear_warps), static_cast<unsigned>(linear_threads), "linear_few_rows",
           static_cast<const Stored*>(w.data), w.scale, w.out, w.in, vectors, x, ldx, y, ldy, alpha, accumulate);
}

// Many rows against stored weights: blocks of channels widened into scratch (at most
// scratch_bytes), then SGEMM.
template <class Stored>
void widened_products(const ops::weight_view& w, const float* x, index_t ldx, index_t rows, float* y, index_t ldy, float alpha,
                      bool accumulate, index_t scratch_bytes = cuda_workspace::linear_scratch_bytes) {
    const index_t block = std::clamp<index_t>(scratch_bytes / static_cast<index_t>(sizeof(float)) / w.in, 1, w.out);
    tensor<float, cuda> buf({block * w.in});
    const auto* W = static_cast<const Stored*>(w.data);
    for (index_t b0 = 0; b0 < w.out; b0 += block) {
        const index_t nb = std::min(block, w.out - b0);
        launch(widen_rows_kernel<Stored>, linear_grid(nb * w.in, linear_threads), static_cast<unsigned>(linear_threads), "widen_rows",
               W + b0 * w.in, w.scale ? w.scale + b0 : nullptr, nb, w.in, buf.data());
        kernel<ops::gemm_op, cuda, float>::run({false, true, rows, nb, w.in, ldx, w.in, ldy}, alpha, x, buf.data(),
                                               accumulate ? 1.0f : 0.0f, y + b0);
    }
}

// Many rows, W in bfloat16: slices of x rounded to bfloat16, products with float32 sums.
inline void bf16_products(const ops::weight_view& w, const float* x, index_t ldx, index_t rows, float* y, index_t ldy, float alpha,
                          bool accumulate) {
    check_int_range(w.out, rows, w.in, w.in, w.in, ldy);
    const index_t slice = std::clamp<index_t>(cuda_workspace::linear_scratch_bytes / 2 / w.in, 1, rows);
    tensor<__nv_bfloat16, cuda> xb({slice * w.in});
    const float beta = accumulate ? 1.0f : 0.0f;
    for (index_t r0 = 0; r0 < rows; r0 += slice) {
        const index_t n = std::min(slice, rows - r0);
        launch(round_to_bf16_kernel, linear_grid(n * w.in, linear_threads), static_cast<unsigned>(linear_threads), "round_to_bf16",
               x + r0 * ldx, ldx, n, w.in, xb.data());
        check(cublasGemmEx(cuda_context::current().blas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.out), static_cast<int>(n),
                           static_cast<int>(w.in), &alpha, w.data, CUDA_R_16BF, static_cast<int>(w.in), xb.data(), CUDA_R_16BF,
                           static_cast<int>(w.in), &beta, y + r0 * ldy, CUDA_R_32F, static_cast<int>(ldy), CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT),
              "cublasGemmEx(bfloat16 inputs, float32 sums)");
    }
}

// Many rows, W in int8: slices of rows quantized, int8 products with int32 sums, scaled back.
inline void i8_products(const ops::weight_view& w, const float* x, index_t ldx, index_t rows, float* y, index_t ldy, float alpha,
                        bool accumulate) {
    check_int_range(w.out, rows, w.in, w.in, w.in, w.out);
    // cuBLAS's int8 path: A and B 4-byte aligned, leading dimensions multiples of 4, alpha 1 and beta 0.
    const bool int8_gemm = w.in % 4 == 0 && reinterpret_cast<std::uintptr_t>(w.data) % 4 == 0;
    // Per row of a slice: q (in bytes), its scale, and the sums: out int32, or (the fallback) x
    // widened and out float32, with half the scratch left for widened weight blocks, which the
    // fallback widens again per slice (rare: row lengths not a multiple of 4).
    const index_t budget = int8_gemm ? cuda_workspace::linear_scratch_bytes : cuda_workspace::linear_scratch_bytes / 2;
    const index_t per_row = w.in + 4 + 4 * w.out + (int8_gemm ? 0 : 4 * w.in);
    const index_t slice = std::clamp<index_t>(budget / per_row, 1, rows);
    tensor<std::int8_t, cuda> q({slice * w.in});
    tensor<float, cuda> s({slice});
    tensor<std::int32_t, cuda> sums({int8_gemm ? slice * w.out : 0});
    tensor<float, cuda> wide({int8_gemm ? 0 : slice * w.in}), fsums({int8_gemm ? 0 : slice * w.out});
    for (index_t r0 = 0; r0 < rows; r0 += slice) {
        const index_t n = std::min(slice, rows - r0);
        launch(quantize_rows_kernel, linear_grid(n, linear_warps), static_cast<unsigned>(linear_threads), "quantize_rows", x + r0 * ldx,
               ldx, n, w.in, q.data(), s.data());
        if (int8_gemm) {
            const std::int32_t one = 1, zero = 0;
            check(cublasGemmEx(cuda_context::current().blas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.out), static_cast<int>(n),
                               static_cast<int>(w.in), &one, w.data, CUDA_R_8I, static_cast<int>(w.in), q.data(), CUDA_R_8I,
                               static_cast<int>(w.in), &zero, sums.data(), CUDA_R_32I, static_cast<int>(w.out), CUBLAS_COMPUTE_32I,
                               CUBLAS_GEMM_DEFAULT),
                  "cublasGemmEx(int8 inputs, int32 sums)");
            launch(scale_sums_kernel<std::int32_t>, linear_grid(n * w.out, linear_threads), static_cast<unsigned>(linear_threads),
                   "scale_sums", static_cast<const std::int32_t*>(sums.data()), static_cast<const float*>(s.data()), w.scale, n, w.out,
                   y + r0 * ldy, ldy, alpha, accumulate);
        } else {
            // q widened (exact) against the widened, scaled weights; then the row scales.
            launch(widen_int8_kernel, linear_grid(n * w.in, linear_threads), static_cast<unsigned>(linear_threads), "widen_int8",
                   static_cast<const std::int8_t*>(q.data()), n * w.in, wide.data());
            widened_products<std::int8_t>(w, wide.data(), w.in, n, fsums.data(), w.out, 1.0f, false, budget);
            launch(scale_sums_kernel<float>, linear_grid(n * w.out, linear_threads), static_cast<unsigned>(linear_threads), "scale_sums",
                   static_cast<const float*>(fsums.data()), static_cast<const float*>(s.data()), static_cast<const float*>(nullptr), n,
                   w.out, y + r0 * ldy, ldy, alpha, accumulate);
        }
    }
}

}  // namespace cuda_detail

template <class T>
void kernel<ops::linear_op, cuda, T>::run(const ops::weight_view& w, const T* x, index_t ldx, index_t rows, T* y, index_t ldy, T alpha,
                                          bool accumulate) {
    if (w.precision == ops::weight_precision::native) {
        kernel<ops::gemm_op, cuda, T>::run({false, true, rows, w.out, w.in, ldx, w.in, ldy}, alpha, x, static_cast<const T*>(w.data),
                                           accumulate ? T(1) : T(0), y);
        return;
    }
    if constexpr (std::is_same_v<T, float>) {
        using ops::weight_precision;
        if (rows <= ops::linear_few_rows) {
            if (ops::stored_bf16(w.precision)) cuda_detail::few_rows<std::uint16_t>(rows, w, x, ldx, y, ldy, alpha, accumulate);
            else cuda_detail::few_rows<std::int8_t>(rows, w, x, ldx, y, ldy, alpha, accumulate);
        } else if (w.precision == weight_precision::bf16_products) {
            cuda_detail::bf16_products(w, x, ldx, rows, y, ldy, alpha, accumulate);
        } else if (w.precision == weight_precision::i8_products) {
            cuda_detail::i8_products(w, x, ldx, rows, y, ldy, alpha, accumulate);
        } else if (w.precision == weight_precision::bf16) {
            cuda_detail::widened_products<std::uint16_t>(w, x, ldx, rows, y, ldy, alpha, accumulate);
        } else {
            cuda_detail::widened_products<std::int8_t>(w, x, ldx, rows, y, ldy, alpha, accumulate);
        }
    } else {
        throw error("weights.precision", "reduced-precision weights (bfloat16, int8) need float32 computation");
    }
}

LOCOST_CUDA_OP_KERNEL(ops::linear_op);

}  // namespace locost
