// GEMM on the CPU: OpenBLAS (cblas_?gemm) when LOCOST_USE_OPENBLAS is defined, else Eigen.
//
// Why both: at the base model's shapes (M 4096, K/N 768–2048) OpenBLAS runs 1.05–1.25× faster
// than Eigen 3.4's own kernels on two cores (bench/bm_gemm, bench/RESULTS.md), but OpenBLAS
// keeps its own thread pool, which must not be entered from inside our OpenMP regions. So a
// product requested from inside a parallel region (the per-channel products of S4D kernel
// generation) always goes to Eigen, which runs serially there; top-level products go to
// OpenBLAS when it is enabled.
#pragma once
#include <omp.h>

#include <Eigen/Core>

#include "../../ops/gemm.hpp"

#ifdef LOCOST_USE_OPENBLAS
#include <cblas.h>
#endif

namespace locost {

namespace cpu_detail {

template <class T>
void eigen_gemm(const ops::gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
    using mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using cmap = Eigen::Map<const mat, 0, Eigen::OuterStride<>>;
    using map = Eigen::Map<mat, 0, Eigen::OuterStride<>>;
    const cmap A(a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, Eigen::OuterStride<>(g.lda));
    const cmap B(b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, Eigen::OuterStride<>(g.ldb));
    map C(c, g.m, g.n, Eigen::OuterStride<>(g.ldc));
    if (beta == T(0)) C.setZero();
    else if (beta != T(1)) C *= beta;
    if (g.trans_a && g.trans_b) C.noalias() += alpha * (A.transpose() * B.transpose());
    else if (g.trans_a) C.noalias() += alpha * (A.transpose() * B);
    else if (g.trans_b) C.noalias() += alpha * (A * B.transpose());
    else C.noalias() += alpha * (A * B);
}

} // namespace cpu_detail

template <class T>
struct kernel<ops::gemm_op, cpu, T> {
    static void run(const ops::gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
#ifdef LOCOST_USE_OPENBLAS
        if (!omp_in_parallel() && g.k > 0) {
            const auto ta = g.trans_a ? CblasTrans : CblasNoTrans, tb = g.trans_b ? CblasTrans : CblasNoTrans;
            const auto M = static_cast<blasint>(g.m), N = static_cast<blasint>(g.n), K = static_cast<blasint>(g.k);
            const auto lda = static_cast<blasint>(g.lda), ldb = static_cast<blasint>(g.ldb), ldc = static_cast<blasint>(g.ldc);
            if constexpr (std::is_same_v<T, float>)
                cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
            else
                cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
            return;
        }
#endif
        cpu_detail::eigen_gemm(g, alpha, a, b, beta, c);
    }
};

} // namespace locost
