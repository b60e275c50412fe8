// The row ops of ops/rows.hpp on the GPU: position rows and sinusoids added to embeddings, a key
// bias from a mask, values set at listed positions, rows gathered and scattered by an index list.
// Each is one grid-stride launch over its elements. Position rows, the key bias, fill_at and the
// gathers move values without arithmetic, so they equal the CPU kernels bit for bit; the
// sinusoid uses the device's sinf/cosf (within 2 ulp of the host's), on the same float argument
// p·ω_k rounded by __fmul_rn as the host rounds it.
#include <cstdint>

#include "runtime.cuh"

namespace locost::cuda_detail::row_kernels {

inline constexpr int threads = 256;

inline unsigned grid_for(index_t count) {
    const index_t blocks = (count + threads - 1) / threads;
    return static_cast<unsigned>(std::min<index_t>(std::max<index_t>(blocks, 1), 65535 * 8));
}

#define LOCOST_GRID_STRIDE(e, count)                                                                                                       \
    for (index_t e = blockIdx.x * static_cast<index_t>(threads) + threadIdx.x; e < (count); e += static_cast<index_t>(gridDim.x) * threads)

template <class T>
__global__ void add_position_rows_kernel(const T* table, index_t dim, index_t first, index_t count, index_t total, T* x) {
    LOCOST_GRID_STRIDE(e, total) {
        const index_t i = e / dim, c = e % dim;
        x[e] += table[(first + i % count) * dim + c];
    }
}

template <class T>
__global__ void add_sinusoid_kernel(const float* omega, index_t dim, index_t first, index_t count, index_t total, T* x) {
    const index_t half = dim / 2;
    LOCOST_GRID_STRIDE(e, total) {
        const index_t i = e / half, k = e % half;
        const float a = __fmul_rn(static_cast<float>(first + i % count), omega[k]);
        x[i * dim + k] += static_cast<T>(sinf(a));
        x[i * dim + half + k] += static_cast<T>(cosf(a));
    }
}

template <class T>
__global__ void key_bias_kernel(const float* mask, index_t n, T* out) {
    LOCOST_GRID_STRIDE(e, n) out[e] = !mask || mask[e] != 0.0f ? T(0) : -static_cast<T>(INFINITY);
}

template <class T>
__global__ void fill_at_kernel(T* x, const std::int64_t* index, index_t count, T value) {
    LOCOST_GRID_STRIDE(e, count) {
        if (index[e] >= 0) x[index[e]] = value;
    }
}

template <class T>
__global__ void gather_rows_kernel(const T* src, index_t lds, index_t n, const std::int64_t* index, index_t S, T* dst, index_t ldd) {
    LOCOST_GRID_STRIDE(e, S * n) {
        const index_t s = e / n, c = e % n;
        dst[s * ldd + c] = index[s] >= 0 ? src[index[s] * lds + c] : T(0);
    }
}

template <class T>
__global__ void scatter_rows_kernel(const T* src, index_t lds, index_t n, const std::int64_t* index, index_t S, T* dst, index_t ldd) {
    LOCOST_GRID_STRIDE(e, S * n) {
        const index_t s = e / n, c = e % n;
        if (index[s] >= 0) dst[index[s] * ldd + c] = src[s * lds + c];
    }
}

#undef LOCOST_GRID_STRIDE

}  // namespace locost::cuda_detail::row_kernels

namespace locost {

namespace rk = cuda_detail::row_kernels;

template <class T>
void kernel<ops::add_position_rows_op, cuda, T>::run(const T* table, index_t dim, index_t first, index_t rows, index_t count, T* x) {
    const index_t total = rows * count * dim;
    if (total > 0)
        cuda_detail::launch(rk::add_position_rows_kernel<T>, rk::grid_for(total), rk::threads, "add_position_rows_kernel", table, dim,
                            first, count, total, x);
}

template <class T>
void kernel<ops::add_sinusoid_op, cuda, T>::run(const float* omega, index_t dim, index_t first, index_t rows, index_t count, T* x) {
    const index_t total = rows * count * (dim / 2);
    if (total > 0)
        cuda_detail::launch(rk::add_sinusoid_kernel<T>, rk::grid_for(total), rk::threads, "add_sinusoid_kernel", omega, dim, first, count,
                            total, x);
}

template <class T>
void kernel<ops::key_bias_op, cuda, T>::run(const float* mask, index_t n, T* out) {
    if (n > 0) cuda_detail::launch(rk::key_bias_kernel<T>, rk::grid_for(n), rk::threads, "key_bias_kernel", mask, n, out);
}

template <class T>
void kernel<ops::fill_at_op, cuda, T>::run(T* x, const std::int64_t* index, index_t count, T value) {
    if (count > 0) cuda_detail::launch(rk::fill_at_kernel<T>, rk::grid_for(count), rk::threads, "fill_at_kernel", x, index, count, value);
}

template <class T>
void kernel<ops::gather_rows_op, cuda, T>::run(const T* src, index_t lds, index_t n, const std::int64_t* index, index_t S, T* dst,
                                               index_t ldd) {
    if (S > 0 && n > 0)
        cuda_detail::launch(rk::gather_rows_kernel<T>, rk::grid_for(S * n), rk::threads, "gather_rows_kernel", src, lds, n, index, S, dst,
                            ldd);
}

template <class T>
void kernel<ops::scatter_rows_op, cuda, T>::run(const T* src, index_t lds, index_t n, const std::int64_t* index, index_t S, T* dst,
                                                index_t ldd) {
    if (S > 0 && n > 0)
        cuda_detail::launch(rk::scatter_rows_kernel<T>, rk::grid_for(S * n), rk::threads, "scatter_rows_kernel", src, lds, n, index, S, dst,
                            ldd);
}

LOCOST_CUDA_OP_KERNEL(ops::add_position_rows_op);
LOCOST_CUDA_OP_KERNEL(ops::add_sinusoid_op);
LOCOST_CUDA_OP_KERNEL(ops::key_bias_op);
LOCOST_CUDA_OP_KERNEL(ops::fill_at_op);
LOCOST_CUDA_OP_KERNEL(ops::gather_rows_op);
LOCOST_CUDA_OP_KERNEL(ops::scatter_rows_op);

}  // namespace locost
