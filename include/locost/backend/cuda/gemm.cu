// GEMM on the GPU through cuBLAS (ops/gemm.hpp states the contract; linear layers are in
// linear.cu). cuBLAS is column-major, and a row-major (M, N) matrix is the column-major (N, M)
// matrix of its transpose, so C = op(A)·op(B) is issued as Cᵀ = op(B)ᵀ·op(A)ᵀ with the operands
// swapped: no copy, no transpose kernel.
#include <type_traits>

#include "runtime.cuh"

namespace locost {

template <class T>
void kernel<ops::gemm_op, cuda, T>::run(const ops::gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
    cuda_detail::check_int_range(g.m, g.n, g.k, g.lda, g.ldb, g.ldc);
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

LOCOST_CUDA_OP_KERNEL(ops::gemm_op);

}  // namespace locost
