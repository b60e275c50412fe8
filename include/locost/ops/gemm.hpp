// General matrix product, row-major:  C = alpha · op(A) · op(B) + beta · C
// with op(X) = X or Xᵀ. A is (M, K) (or (K, M) when transposed), B is (K, N) (or (N, K)), C is
// (M, N); lda/ldb/ldc are row strides. Weights stored (out, in) as PyTorch's Linear stores them
// are used with trans_b = true.
#pragma once
#include "../backend/backend.hpp"
#include "../core/tensor.hpp"

namespace locost::ops {

struct gemm_op {};

struct gemm_args {
    bool trans_a = false, trans_b = false;
    index_t m = 0, n = 0, k = 0;
    index_t lda = 0, ldb = 0, ldc = 0;
};

template <class Backend, class T>
void gemm(const gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
    if (g.m == 0 || g.n == 0) return;
    kernel<gemm_op, Backend, T>::run(g, alpha, a, b, beta, c);
}

// y(rows, out) = x(rows, in) · W(out, in)ᵀ  [+ y when accumulate]. Strides are dense.
template <class Backend, class T>
void matmul_wt(const T* x, const T* w, T* y, index_t rows, index_t in, index_t out, bool accumulate = false) {
    gemm<Backend, T>({false, true, rows, out, in, in, in, out}, T(1), x, w, T(accumulate ? 1 : 0), y);
}

}  // namespace locost::ops
