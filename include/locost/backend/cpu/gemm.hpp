// GEMM on the CPU: OpenBLAS (cblas_?gemm) when LOCOST_USE_OPENBLAS is defined, else Eigen.
//
// Why OpenBLAS: at the base model's shapes (M 1024–4096, K/N 768–2048) it runs 1.05–1.25×
// faster than Eigen 3.4's own kernels on two cores (bench/bm_gemm, bench/RESULTS.md).
//
// Threads: one pool. OpenBLAS keeps a pthread pool of its own whose idle workers spin in
// sched_yield while our OpenMP loops run, and OpenMP's idle workers spin while OpenBLAS runs;
// on two cores that contention cost 10–15 % of an encoder pass (perf). So OpenBLAS is set to one
// thread and a large product is split over the OpenMP threads here, each slice one
// single-threaded cblas call (along M when it has enough rows, else along N). A product
// requested from inside a parallel region (the per-channel products of S4D kernel generation)
// runs serially on the calling thread.
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

#ifdef LOCOST_USE_OPENBLAS
namespace cpu_detail {

inline void openblas_single_threaded() {
    static const bool once = [] {
        openblas_set_num_threads(1);
        return true;
    }();
    (void)once;
}

template <class T>
void blas_gemm(const ops::gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
    const auto ta = g.trans_a ? CblasTrans : CblasNoTrans, tb = g.trans_b ? CblasTrans : CblasNoTrans;
    const auto M = static_cast<blasint>(g.m), N = static_cast<blasint>(g.n), K = static_cast<blasint>(g.k);
    const auto lda = static_cast<blasint>(g.lda), ldb = static_cast<blasint>(g.ldb), ldc = static_cast<blasint>(g.ldc);
    if constexpr (std::is_same_v<T, float>)
        cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}

} // namespace cpu_detail
#endif

template <class T>
struct kernel<ops::gemm_op, cpu, T> {
    static void run(const ops::gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
#ifdef LOCOST_USE_OPENBLAS
        if (g.k == 0) {
            cpu_detail::eigen_gemm(g, alpha, a, b, beta, c);
            return;
        }
        cpu_detail::openblas_single_threaded();
        const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
        // Below ~0.1 MFLOP a parallel region (a few µs) costs more than it saves; decoding's
        // matrix-vector products (768 × 768 and up) are above it and memory-bound, so they
        // gain from both cores' bandwidth.
        if (threads == 1 || g.m * g.n * g.k < (index_t{1} << 16)) {
            cpu_detail::blas_gemm(g, alpha, a, b, beta, c);
            return;
        }
        const bool split_m = g.m >= 16 * threads;
        const index_t extent = split_m ? g.m : g.n;
#pragma omp parallel num_threads(threads)
        {
            const index_t t = omp_get_thread_num(), nt = omp_get_num_threads();
            // Slices aligned to 16 rows/columns (one AVX-512 vector of floats).
            const index_t per = (extent + nt * 16 - 1) / (nt * 16) * 16;
            const index_t begin = std::min(extent, t * per), end = std::min(extent, begin + per);
            if (begin < end) {
                ops::gemm_args s = g;
                if (split_m) {
                    s.m = end - begin;
                    cpu_detail::blas_gemm(s, alpha, a + (g.trans_a ? begin : begin * g.lda), b, beta, c + begin * g.ldc);
                } else {
                    s.n = end - begin;
                    cpu_detail::blas_gemm(s, alpha, a, b + (g.trans_b ? begin * g.ldb : begin), beta, c + begin);
                }
            }
        }
#else
        cpu_detail::eigen_gemm(g, alpha, a, b, beta, c);
#endif
    }
};

} // namespace locost
