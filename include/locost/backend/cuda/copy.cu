// The copy ops of ops/copy.hpp on the GPU: strided_copy, fill, store_rows and gather_sum (the decoder's
// caches: a step's keys and values appended, beams reordered, the cross-attention cache written
// in its storage precision).
//
// strided_copy and fill are one grid-stride launch each over every element, so a call costs one
// launch however many rows it moves. store_rows into float32 or bfloat16 is elementwise too; into
// int8 it needs each row's max|x| before any value can be written, so it gives one block per row
// and reduces in the block. Every stored byte equals what the CPU kernel (backend/cpu/copy.hpp)
// writes: the bfloat16 rounding is dtype.hpp's float_to_bf16 bit for bit, and the int8 scale and
// values use the same float operations with IEEE rounding (max is exact, so the reduction order
// does not matter there).
#include <cstdint>

#include "runtime.cuh"

namespace locost::cuda_detail::copy_kernels {

inline constexpr int threads = 256;

inline unsigned grid_for(index_t count) {
    const index_t blocks = (count + threads - 1) / threads;
    return static_cast<unsigned>(std::min<index_t>(std::max<index_t>(blocks, 1), 65535 * 8));
}

// dst and src never overlap in the model's uses (the self-attention cache is appended from a
// separate projection, beams are reordered into a second buffer), so unlike the CPU kernel's
// memmove this does not order its reads before its writes.
template <class T>
__global__ void strided_copy_kernel(T* dst, const T* src, ops::copy_layout l) {
    const index_t count = l.n0 * l.n1 * l.n2 * l.width;
    for (index_t e = blockIdx.x * static_cast<index_t>(threads) + threadIdx.x; e < count; e += static_cast<index_t>(gridDim.x) * threads) {
        const index_t c = e % l.width;
        index_t r = e / l.width;
        const index_t k = r % l.n2;
        r /= l.n2;
        const index_t j = r % l.n1, i = r / l.n1;
        dst[i * l.dst0 + j * l.dst1 + k * l.dst2 + c] = src[i * l.src0 + j * l.src1 + k * l.src2 + c];
    }
}

template <class T>
__global__ void fill_kernel(T* x, index_t count, T value) {
    for (index_t e = blockIdx.x * static_cast<index_t>(threads) + threadIdx.x; e < count; e += static_cast<index_t>(gridDim.x) * threads)
        x[e] = value;
}

// locost::float_to_bf16 (core/dtype.hpp) on the device: round to nearest even by adding 0x7fff
// plus the kept part's lowest bit, and a NaN kept a quiet NaN with its sign and high payload.
// CUDA's __float2bfloat16_rn rounds the same but returns a canonical NaN, so the cache's bytes
// would differ from the CPU's for NaN inputs.
__device__ inline std::uint16_t to_bf16(float f) {
    std::uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<std::uint16_t>(u >> 16);
}

template <class T>
__global__ void store_f32_kernel(const T* x, index_t ldx, index_t rows, index_t n, float* dst) {
    const index_t count = rows * n;
    for (index_t e = blockIdx.x * static_cast<index_t>(threads) + threadIdx.x; e < count; e += static_cast<index_t>(gridDim.x) * threads)
        dst[e] = static_cast<float>(x[(e / n) * ldx + e % n]);
}

template <class T>
__global__ void store_bf16_kernel(const T* x, index_t ldx, index_t rows, index_t n, std::uint16_t* dst) {
    const index_t count = rows * n;
    for (index_t e = blockIdx.x * static_cast<index_t>(threads) + threadIdx.x; e < count; e += static_cast<index_t>(gridDim.x) * threads)
        dst[e] = to_bf16(static_cast<float>(x[(e / n) * ldx + e % n]));
}

// One block per row. The CPU's scale is s = m / 127 (1 for an all-zero row) with m = max|float(x)|,
// and each value lrint(float(x) · (1 / s)): __fdiv_rn, __fmul_rn and __float2int_rn are those
// operations with the IEEE round-to-nearest-even that the host uses in its default mode (spelled
// out so that no compiler flag can turn them into approximations or fuse them). fmaxf skips a NaN
// as std::max(m, NaN) does, so a NaN entry never becomes the scale on either side.
template <class T>
__global__ void store_i8_kernel(const T* x, index_t ldx, index_t n, std::int8_t* dst, float* scale) {
    __shared__ float warp_max[threads / 32];
    const T* row = x + static_cast<index_t>(blockIdx.x) * ldx;
    float m = 0.0f;
    for (index_t c = threadIdx.x; c < n; c += threads) m = fmaxf(m, fabsf(static_cast<float>(row[c])));
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
    __syncthreads();
    m = 0.0f;
    for (int w = 0; w < threads / 32; ++w) m = fmaxf(m, warp_max[w]);
    const float s = m > 0.0f ? __fdiv_rn(m, 127.0f) : 1.0f, inv = __fdiv_rn(1.0f, s);
    if (threadIdx.x == 0) scale[blockIdx.x] = s;
    std::int8_t* out = dst + static_cast<index_t>(blockIdx.x) * n;
    for (index_t c = threadIdx.x; c < n; c += threads)
        out[c] = static_cast<std::int8_t>(__float2int_rn(__fmul_rn(static_cast<float>(row[c]), inv)));
}

// One block per segment (grid-stride over segments), threads over the columns; each output sums
// its segment's rows in list order starting from zero, as the CPU kernel does, so the two agree
// bit for bit.
template <class T>
__global__ void gather_sum_kernel(const T* x, index_t ldx, index_t n, const std::int64_t* offsets, const std::int64_t* rows, index_t S,
                                  T* out, index_t ldo) {
    for (index_t s = blockIdx.x; s < S; s += gridDim.x)
        for (index_t c = threadIdx.x; c < n; c += threads) {
            T acc = T(0);
            for (std::int64_t k = offsets[s]; k < offsets[s + 1]; ++k) acc += x[rows[k] * ldx + c];
            out[s * ldo + c] = acc;
        }
}

}  // namespace locost::cuda_detail::copy_kernels

namespace locost {

namespace ck = cuda_detail::copy_kernels;

template <class T>
void kernel<ops::strided_copy_op, cuda, T>::run(T* dst, const T* src, const ops::copy_layout& l) {
    const index_t count = l.n0 * l.n1 * l.n2 * l.width;
    if (count > 0) cuda_detail::launch(ck::strided_copy_kernel<T>, ck::grid_for(count), ck::threads, "strided_copy_kernel", dst, src, l);
}

template <class T>
void kernel<ops::fill_op, cuda, T>::run(T* x, index_t count, T value) {
    if (count > 0) cuda_detail::launch(ck::fill_kernel<T>, ck::grid_for(count), ck::threads, "fill_kernel", x, count, value);
}

template <class T>
void kernel<ops::store_rows_op, cuda, T>::run(ops::kv_precision p, const T* x, index_t ldx, index_t rows, index_t n, void* dst,
                                              float* scale) {
    if (rows <= 0) return;
    switch (p) {
    case ops::kv_precision::f32:
        if (rows * n > 0)
            cuda_detail::launch(ck::store_f32_kernel<T>, ck::grid_for(rows * n), ck::threads, "store_f32_kernel", x, ldx, rows, n,
                                static_cast<float*>(dst));
        break;
    case ops::kv_precision::bf16:
        if (rows * n > 0)
            cuda_detail::launch(ck::store_bf16_kernel<T>, ck::grid_for(rows * n), ck::threads, "store_bf16_kernel", x, ldx, rows, n,
                                static_cast<std::uint16_t*>(dst));
        break;
    case ops::kv_precision::i8:
        // Also for n = 0: the CPU writes scale 1 for every row.
        if (rows > 0x7fffffff) throw error("cuda.unsupported", "store_rows: more than 2^31 - 1 rows in one call");
        cuda_detail::launch(ck::store_i8_kernel<T>, static_cast<unsigned>(rows), ck::threads, "store_i8_kernel", x, ldx, n,
                            static_cast<std::int8_t*>(dst), scale);
        break;
    case ops::kv_precision::native:
        throw error("cuda.unsupported", "store_rows: the storage precision must be f32, bf16 or i8, not native");
    }
}

template <class T>
void kernel<ops::gather_sum_op, cuda, T>::run(const T* x, index_t ldx, index_t n, const std::int64_t* offsets, const std::int64_t* rows,
                                              index_t S, T* out, index_t ldo) {
    if (S <= 0 || n <= 0) return;
    const auto blocks = static_cast<unsigned>(std::min<index_t>(S, 65535 * 8));
    cuda_detail::launch(ck::gather_sum_kernel<T>, blocks, ck::threads, "gather_sum_kernel", x, ldx, n, offsets, rows, S, out, ldo);
}

LOCOST_CUDA_OP_KERNEL(ops::gather_sum_op);
LOCOST_CUDA_OP_KERNEL(ops::strided_copy_op);
LOCOST_CUDA_OP_KERNEL(ops::fill_op);
LOCOST_CUDA_OP_KERNEL(ops::store_rows_op);

}  // namespace locost
