// Elementwise and row-wise ops on the GPU (ops/elementwise.hpp and ops/embedding.hpp state each
// one). Row ops give one block per row and reduce in the scalar type in a fixed order per row, so
// results do not depend on timing.
#include <cmath>

#include "runtime.cuh"

namespace locost::cuda_detail {

inline constexpr int block = 256;

inline unsigned grid_for(index_t count) {
    const index_t blocks = (count + block - 1) / block;
    return static_cast<unsigned>(std::min<index_t>(std::max<index_t>(blocks, 1), 65535 * 8));
}

template <activation Act, class T>
__device__ inline T act(T x) {
    if constexpr (Act == activation::relu) return x > T(0) ? x : T(0);
    else if constexpr (Act == activation::gelu_tanh) {
        const T c = T(0.7978845608028654);  // sqrt(2/pi)
        return T(0.5) * x * (T(1) + tanh(c * (x + T(0.044715) * x * x * x)));
    } else if constexpr (Act == activation::gelu_erf) return T(0.5) * x * (T(1) + erf(x * T(0.7071067811865476)));
    else return x / (T(1) + exp(-x));
}

struct sum_op {
    template <class T>
    __device__ T operator()(T a, T b) const {
        return a + b;
    }
};
struct max_op {
    template <class T>
    __device__ T operator()(T a, T b) const {
        return max(a, b);
    }
};

// Reduction over the block (blockDim.x == block) with op and its identity; every thread gets the
// result. Warps reduce by shuffles, then the first warp reduces the warps' results.
template <class T, class Op>
__device__ inline T block_reduce(T v, T identity, Op op, T* shared) {
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, o));
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < block / 32 ? shared[lane] : identity;
        for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, o));
        if (lane == 0) shared[0] = v;
    }
    __syncthreads();
    const T total = shared[0];
    __syncthreads();
    return total;
}

template <class T>
__device__ inline T block_sum(T v, T* shared) {
    return block_reduce(v, T(0), sum_op{}, shared);
}
template <class T>
__device__ inline T block_max(T v, T* shared) {
    return block_reduce(v, -static_cast<T>(INFINITY), max_op{}, shared);
}

template <class T>
__global__ void rms_norm_kernel(const T* x, index_t ldx, const T* w, T eps, T* y, index_t ldy, index_t n) {
    __shared__ T shared[block / 32];
    const T* xr = x + static_cast<index_t>(blockIdx.x) * ldx;
    T* yr = y + static_cast<index_t>(blockIdx.x) * ldy;
    T ss = 0;
    for (index_t i = threadIdx.x; i < n; i += block) ss += xr[i] * xr[i];
    ss = block_sum(ss, shared);
    const T inv = T(1) / sqrt(ss / static_cast<T>(n) + eps);
    for (index_t i = threadIdx.x; i < n; i += block) yr[i] = xr[i] * inv * w[i];
}

template <class T>
__global__ void layer_norm_kernel(const T* x, index_t ldx, const T* w, const T* b, T eps, T* y, index_t ldy, index_t n) {
    __shared__ T shared[block / 32];
    const T* xr = x + static_cast<index_t>(blockIdx.x) * ldx;
    T* yr = y + static_cast<index_t>(blockIdx.x) * ldy;
    T s = 0;
    for (index_t i = threadIdx.x; i < n; i += block) s += xr[i];
    const T mean = block_sum(s, shared) / static_cast<T>(n);
    T ss = 0;
    for (index_t i = threadIdx.x; i < n; i += block) ss += (xr[i] - mean) * (xr[i] - mean);
    const T inv = T(1) / sqrt(block_sum(ss, shared) / static_cast<T>(n) + eps);
    for (index_t i = threadIdx.x; i < n; i += block) yr[i] = (xr[i] - mean) * inv * w[i] + b[i];
}

template <class T>
__global__ void softmax_rows_kernel(T* x, index_t n, index_t ld) {
    __shared__ T shared[block / 32];
    T* xr = x + static_cast<index_t>(blockIdx.x) * ld;
    T m = -static_cast<T>(INFINITY);
    for (index_t i = threadIdx.x; i < n; i += block) m = max(m, xr[i]);
    m = block_max(m, shared);
    if (m == -static_cast<T>(INFINITY)) {  // every entry masked: zeros, as on the CPU
        for (index_t i = threadIdx.x; i < n; i += block) xr[i] = T(0);
        return;
    }
    T s = 0;
    for (index_t i = threadIdx.x; i < n; i += block) s += (xr[i] = exp(xr[i] - m));
    const T inv = T(1) / block_sum(s, shared);
    for (index_t i = threadIdx.x; i < n; i += block) xr[i] *= inv;
}

template <activation Act, class T>
__global__ void activate_kernel(T* x, index_t count) {
    for (index_t i = blockIdx.x * static_cast<index_t>(block) + threadIdx.x; i < count; i += static_cast<index_t>(gridDim.x) * block)
        x[i] = act<Act>(x[i]);
}

template <activation Act, class T>
__global__ void gate_kernel(T* a, const T* b, index_t rows, index_t n, index_t ld) {
    const index_t count = rows * n;
    for (index_t i = blockIdx.x * static_cast<index_t>(block) + threadIdx.x; i < count; i += static_cast<index_t>(gridDim.x) * block) {
        const index_t r = i / n, c = i % n;
        a[r * ld + c] = act<Act>(a[r * ld + c]) * b[r * ld + c];
    }
}

template <class T>
__global__ void mul_kernel(T* y, const T* q, index_t count) {
    for (index_t i = blockIdx.x * static_cast<index_t>(block) + threadIdx.x; i < count; i += static_cast<index_t>(gridDim.x) * block)
        y[i] *= q[i];
}

template <class T>
__global__ void add_rows_kernel(T* y, const T* bias, index_t rows, index_t n) {
    const index_t count = rows * n;
    for (index_t i = blockIdx.x * static_cast<index_t>(block) + threadIdx.x; i < count; i += static_cast<index_t>(gridDim.x) * block)
        y[i] += bias[i % n];
}

template <class T>
__global__ void scale_rows_kernel(T* y, const T* s, index_t rows, index_t n) {
    const index_t count = rows * n;
    for (index_t i = blockIdx.x * static_cast<index_t>(block) + threadIdx.x; i < count; i += static_cast<index_t>(gridDim.x) * block)
        y[i] *= s[i / n];
}

template <class T>
__global__ void embedding_kernel(const T* table, index_t dim, const std::int64_t* ids, index_t n, T* out, T scale) {
    const index_t count = n * dim;
    for (index_t i = blockIdx.x * static_cast<index_t>(block) + threadIdx.x; i < count; i += static_cast<index_t>(gridDim.x) * block)
        out[i] = table[ids[i / dim] * dim + i % dim] * scale;
}

template <class T>
__global__ void add_embedding_kernel(const T* table, index_t dim, const std::int64_t* ids, index_t n, T* out) {
    const index_t count = n * dim;
    for (index_t i = blockIdx.x * static_cast<index_t>(block) + threadIdx.x; i < count; i += static_cast<index_t>(gridDim.x) * block)
        out[i] += table[ids[i / dim] * dim + i % dim];
}

// Row ops launch one block per row; the grid's x extent holds any row count we allocate.
inline unsigned row_grid(index_t rows) { return static_cast<unsigned>(rows); }

}  // namespace locost::cuda_detail

namespace locost {

using cuda_detail::block;
using cuda_detail::grid_for;
using cuda_detail::row_grid;


template <class T>
void kernel<ops::rms_norm_op, cuda, T>::run(const T* x, index_t ldx, const T* w, T eps, T* y, index_t ldy, index_t rows, index_t n) {
    if (rows) cuda_detail::launch(cuda_detail::rms_norm_kernel<T>, row_grid(rows), block, "rms_norm_kernel", x, ldx, w, eps, y, ldy, n);
}

template <class T>
void kernel<ops::layer_norm_op, cuda, T>::run(const T* x, index_t ldx, const T* w, const T* b, T eps, T* y, index_t ldy, index_t rows,
                                              index_t n) {
    if (rows)
        cuda_detail::launch(cuda_detail::layer_norm_kernel<T>, row_grid(rows), block, "layer_norm_kernel", x, ldx, w, b, eps, y, ldy, n);
}

template <class T>
void kernel<ops::softmax_rows_op, cuda, T>::run(T* x, index_t rows, index_t n, index_t ld) {
    if (rows) cuda_detail::launch(cuda_detail::softmax_rows_kernel<T>, row_grid(rows), block, "softmax_rows_kernel", x, n, ld);
}

template <class T>
void kernel<ops::activate_op, cuda, T>::run_with(activation act, T* x, index_t count) {
    if (!count) return;
    switch (act) {
    case activation::relu:
        cuda_detail::launch(cuda_detail::activate_kernel<activation::relu, T>, grid_for(count), block, "activate_kernel", x, count);
        break;
    case activation::gelu_tanh:
        cuda_detail::launch(cuda_detail::activate_kernel<activation::gelu_tanh, T>, grid_for(count), block, "activate_kernel", x, count);
        break;
    case activation::gelu_erf:
        cuda_detail::launch(cuda_detail::activate_kernel<activation::gelu_erf, T>, grid_for(count), block, "activate_kernel", x, count);
        break;
    case activation::silu:
        cuda_detail::launch(cuda_detail::activate_kernel<activation::silu, T>, grid_for(count), block, "activate_kernel", x, count);
        break;
    }
}

template <class T>
void kernel<ops::gate_op, cuda, T>::run_with(activation act, T* a, const T* b, index_t rows, index_t n, index_t ld) {
    const index_t count = rows * n;
    if (!count) return;
    switch (act) {
    case activation::relu:
        cuda_detail::launch(cuda_detail::gate_kernel<activation::relu, T>, grid_for(count), block, "gate_kernel", a, b, rows, n, ld);
        break;
    case activation::gelu_tanh:
        cuda_detail::launch(cuda_detail::gate_kernel<activation::gelu_tanh, T>, grid_for(count), block, "gate_kernel", a, b, rows, n, ld);
        break;
    case activation::gelu_erf:
        cuda_detail::launch(cuda_detail::gate_kernel<activation::gelu_erf, T>, grid_for(count), block, "gate_kernel", a, b, rows, n, ld);
        break;
    case activation::silu:
        cuda_detail::launch(cuda_detail::gate_kernel<activation::silu, T>, grid_for(count), block, "gate_kernel", a, b, rows, n, ld);
        break;
    }
}

template <class T>
void kernel<ops::mul_op, cuda, T>::run(T* y, const T* q, index_t count) {
    if (count) cuda_detail::launch(cuda_detail::mul_kernel<T>, grid_for(count), block, "mul_kernel", y, q, count);
}

template <class T>
void kernel<ops::add_rows_op, cuda, T>::run(T* y, const T* bias, index_t rows, index_t n) {
    if (rows * n) cuda_detail::launch(cuda_detail::add_rows_kernel<T>, grid_for(rows * n), block, "add_rows_kernel", y, bias, rows, n);
}

template <class T>
void kernel<ops::scale_rows_op, cuda, T>::run(T* y, const T* s, index_t rows, index_t n) {
    if (rows * n) cuda_detail::launch(cuda_detail::scale_rows_kernel<T>, grid_for(rows * n), block, "scale_rows_kernel", y, s, rows, n);
}

template <class T>
void kernel<ops::embedding_op, cuda, T>::run(const T* table, index_t dim, const std::int64_t* ids, index_t n, T* out, T scale) {
    if (n * dim)
        cuda_detail::launch(cuda_detail::embedding_kernel<T>, grid_for(n * dim), block, "embedding_kernel", table, dim, ids, n, out, scale);
}

template <class T>
void kernel<ops::add_embedding_op, cuda, T>::run(const T* table, index_t dim, const std::int64_t* ids, index_t n, T* out) {
    if (n * dim)
        cuda_detail::launch(cuda_detail::add_embedding_kernel<T>, grid_for(n * dim), block, "add_embedding_kernel", table, dim, ids, n,
                            out);
}

LOCOST_CUDA_OP_KERNEL(ops::rms_norm_op);
LOCOST_CUDA_OP_KERNEL(ops::layer_norm_op);
LOCOST_CUDA_OP_KERNEL(ops::softmax_rows_op);
LOCOST_CUDA_OP_KERNEL(ops::activate_op);
LOCOST_CUDA_OP_KERNEL(ops::gate_op);
LOCOST_CUDA_OP_KERNEL(ops::mul_op);
LOCOST_CUDA_OP_KERNEL(ops::add_rows_op);
LOCOST_CUDA_OP_KERNEL(ops::scale_rows_op);
LOCOST_CUDA_OP_KERNEL(ops::embedding_op);
LOCOST_CUDA_OP_KERNEL(ops::add_embedding_op);

}  // namespace locost
