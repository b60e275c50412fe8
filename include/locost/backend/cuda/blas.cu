// GEMM and linear layers on the GPU through cuBLAS (ops/gemm.hpp, ops/linear.hpp state the
// contracts). cuBLAS is column-major, and a row-major (M, N) matrix is the column-major (N, M)
// matrix of its transpose, so C = op(A)·op(B) is issued as Cᵀ = op(B)ᵀ·op(A)ᵀ with the operands
// swapped: no copy, no transpose kernel.
#include <cuda_bf16.h>

#include <limits>
#include <type_traits>

#include "runtime.cuh"

namespace locost {

namespace cuda_detail {

inline void check_int_range(const ops::gemm_args& g) {
    constexpr index_t int_max = std::numeric_limits<int>::max();
    if (g.m > int_max || g.n > int_max || g.k > int_max || g.lda > int_max || g.ldb > int_max || g.ldc > int_max)
        throw error("cuda.gemm_too_large", "GEMM of " + std::to_string(g.m) + " x " + std::to_string(g.n) + " x " + std::to_string(g.k) +
                                               ": a dimension or row stride exceeds cuBLAS's 32-bit int");
}

__global__ void round_to_bf16(const float* x, index_t ldx, index_t rows, index_t cols, __nv_bfloat16* out) {
    const index_t count = rows * cols;
    for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < count; i += static_cast<index_t>(gridDim.x) * blockDim.x)
        out[i] = __float2bfloat16_rn(x[(i / cols) * ldx + i % cols]);
}

// A per-thread device buffer that only grows: the rounded inputs of bfloat16 products.
inline __nv_bfloat16* bf16_scratch(std::size_t n) {
    thread_local tensor<__nv_bfloat16, cuda> buf;
    if (static_cast<std::size_t>(buf.numel()) < n) buf = tensor<__nv_bfloat16, cuda>({static_cast<index_t>(n)});
    return buf.data();
}

} // namespace cuda_detail

template <class T>
void kernel<ops::gemm_op, cuda, T>::run(const ops::gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
    cuda_detail::check_int_range(g);
    const cublasOperation_t tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int m = static_cast<int>(g.n), n = static_cast<int>(g.m), k = static_cast<int>(g.k);
    cublasHandle_t h = cuda_context::current().blas();
    if constexpr (std::is_same_v<T, float>)
        cuda_detail::check(cublasSgemm(h, tb, ta, m, n, k, &alpha, b, static_cast<int>(g.ldb), a, static_cast<int>(g.lda), &beta, c,
                                       static_cast<int>(g.ldc)),
                           "cublasSgemm");
    else
        cuda_detail::check(cublasDgemm(h, tb, ta, m, n, k, &alpha, b, static_cast<int>(g.ldb), a, static_cast<int>(g.lda), &beta, c,
                                       static_cast<int>(g.ldc)),
                           "cublasDgemm");
}

template <class T>
void kernel<ops::linear_op, cuda, T>::run(const ops::weight_view& w, const T* x, index_t ldx, index_t rows, T* y, index_t ldy, T alpha,
                                          bool accumulate) {
    const T beta = accumulate ? T(1) : T(0);
    const ops::gemm_args g{false, true, rows, w.out, w.in, ldx, w.in, ldy};
    if (w.precision == ops::weight_precision::native) {
        kernel<ops::gemm_op, cuda, T>::run(g, alpha, x, static_cast<const T*>(w.data), beta, y);
        return;
    }
    if constexpr (std::is_same_v<T, float>) {
        if (w.precision == ops::weight_precision::bf16_products) {
            cuda_detail::check_int_range(g);
            __nv_bfloat16* xb = cuda_detail::bf16_scratch(static_cast<std::size_t>(rows * w.in));
            cuda_detail::launch(cuda_detail::round_to_bf16, static_cast<unsigned>(std::min<index_t>((rows * w.in + 255) / 256, 65535 * 8)),
                                256u, "round_to_bf16", x, ldx, rows, w.in, xb);
            cuda_detail::check(cublasGemmEx(cuda_context::current().blas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.out),
                                            static_cast<int>(rows), static_cast<int>(w.in), &alpha, w.data, CUDA_R_16BF,
                                            static_cast<int>(w.in), xb, CUDA_R_16BF, static_cast<int>(w.in), &beta, y, CUDA_R_32F,
                                            static_cast<int>(ldy), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                               "cublasGemmEx(bfloat16 inputs, float32 sums)");
            return;
        }
    }
    throw error("cuda.unsupported", std::string("the CUDA backend has no ") +
                                        (ops::stored_i8(w.precision) ? "int8" : "bfloat16") +
                                        " weight storage or products yet (--weights float32, and --compute fp32 or bf16)");
}

template struct kernel<ops::gemm_op, cuda, float>;
template struct kernel<ops::gemm_op, cuda, double>;
template struct kernel<ops::linear_op, cuda, float>;
template struct kernel<ops::linear_op, cuda, double>;

} // namespace locost
