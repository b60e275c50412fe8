// The CUDA backend as host code sees it: memory, transfers and the op kernels of locost::cuda,
// declared here and defined in the .cu files beside this header (runtime.cu, gemm.cu,
// elementwise.cu, ssm_kernels.cu, bidirectional_conv.cu, copy.cu, rows.cu, attention.cu), which nvcc compiles once into the
// locost::locost_cuda library (-DLOCOST_CUDA=ON) for float and double. So model code
// instantiated with locost::cuda is ordinary C++ compiled by the host compiler, and no host
// translation unit includes a CUDA header; pointers given to these ops are device pointers
// (tensor<T, cuda>::data()).
//
// Every op is issued in order on the calling thread's stream and not waited for; transfers to
// and from the host wait (their host side may go away on return). Failures are locost::error:
// cuda.call_failed names the CUDA, cuBLAS or cuFFT call, cuda.out_of_memory the allocation.
#pragma once
#include <algorithm>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../../core/tensor.hpp"
#include "../../ops/attention.hpp"
#include "../../ops/bidirectional_conv.hpp"
#include "../../ops/copy.hpp"
#include "../../ops/elementwise.hpp"
#include "../../ops/embedding.hpp"
#include "../../ops/gemm.hpp"
#include "../../ops/linear.hpp"
#include "../../ops/rows.hpp"
#include "../../ops/ssm_kernels.hpp"
#include "../backend.hpp"
#include "../device.hpp"

namespace locost {

// The GPUs the CUDA runtime sees; device.no_gpu (with the runtime's reason) when there are none.
std::vector<gpu_properties> cuda_devices();

namespace cuda_detail {
void* device_allocate(std::size_t bytes);
void device_free(void* p) noexcept;
void upload(void* device_dst, const void* host_src, std::size_t bytes);
void download(void* host_dst, const void* device_src, std::size_t bytes);
void copy(void* device_dst, const void* device_src, std::size_t bytes);
void copy_2d(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch, std::size_t width, std::size_t rows);
// Waits for the calling thread's stream; an earlier kernel's fault surfaces here.
void synchronize();

// Device memory through the backend's caching allocator (backend/block_cache.hpp): bytes in
// tensors now (current) and at most since the last reset (peak); bytes held from the driver, in
// tensors or cached for reuse (reserved, and its peak: what the GPU had to have); of which cached.
// cuBLAS's and cuFFT's own workspaces are not counted. LOCOST_CUDA_NO_CACHE=1 turns the cache off.
struct device_memory_stats {
    std::size_t current = 0, peak = 0;
    std::size_t reserved = 0, peak_reserved = 0, cached = 0;
};
device_memory_stats memory_stats();
void reset_peak_memory();
// Waits for the calling thread's stream and gives every cached block back to the driver (for
// another process or library on the same GPU; locost itself releases them when cudaMalloc fails).
void release_cached_memory();

// The GPU's time between start() and stop() on the calling thread's stream, from CUDA events:
// what the device took, whatever the host did meanwhile (benchmarks).
class gpu_timer {
public:
    gpu_timer();
    ~gpu_timer();
    gpu_timer(const gpu_timer&) = delete;
    gpu_timer& operator=(const gpu_timer&) = delete;
    void start();
    // Waits for the stream up to the stop mark; milliseconds since start().
    double stop_ms();

private:
    void* begin_ = nullptr;  // cudaEvent_t
    void* end_ = nullptr;
};

struct device_free_deleter {
    void operator()(void* p) const noexcept { device_free(p); }
};
}  // namespace cuda_detail

template <>
struct memory<cuda> {
    template <class T>
    using pointer = std::unique_ptr<T[], cuda_detail::device_free_deleter>;
    template <class T>
    static pointer<T> allocate(std::size_t n) {
        return pointer<T>(static_cast<T*>(cuda_detail::device_allocate(n * sizeof(T))));
    }
};

template <>
struct transfer<cuda> {
    template <class T>
    static void upload(T* dst, const T* src, std::size_t n) {
        cuda_detail::upload(dst, src, n * sizeof(T));
    }
    template <class T>
    static void download(T* dst, const T* src, std::size_t n) {
        cuda_detail::download(dst, src, n * sizeof(T));
    }
    template <class T>
    static void copy(T* dst, const T* src, std::size_t n) {
        cuda_detail::copy(dst, src, n * sizeof(T));
    }
    template <class T>
    static void copy_2d(T* dst, index_t dst_pitch, const T* src, index_t src_pitch, index_t width, index_t rows) {
        cuda_detail::copy_2d(dst, static_cast<std::size_t>(dst_pitch) * sizeof(T), src, static_cast<std::size_t>(src_pitch) * sizeof(T),
                             static_cast<std::size_t>(width) * sizeof(T), static_cast<std::size_t>(rows));
    }
};

template <class T>
tensor<T, cuda> to_device(const tensor<T, cpu>& h) {
    tensor<T, cuda> d(h.shape());
    transfer<cuda>::upload(d.data(), h.data(), static_cast<std::size_t>(h.numel()));
    return d;
}

template <class T>
tensor<T, cpu> to_host(const tensor<T, cuda>& d) {
    tensor<T, cpu> h(d.shape());
    transfer<cuda>::download(h.data(), d.data(), static_cast<std::size_t>(d.numel()));
    return h;
}

// ---- op kernels (definitions in the .cu files) ------------------------------------------

template <class T>
struct kernel<ops::gemm_op, cuda, T> {
    static void run(const ops::gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c);
};

// native: cuBLAS; bf16_products: x rounded to bfloat16, cuBLAS with float32 sums (as on the
// CPU); bf16 and int8 storage (decoding) are not on the CUDA backend yet: cuda.unsupported.
template <class T>
struct kernel<ops::linear_op, cuda, T> {
    static void run(const ops::weight_view& w, const T* x, index_t ldx, index_t rows, T* y, index_t ldy, T alpha, bool accumulate);
};

template <class T>
struct kernel<ops::rms_norm_op, cuda, T> {
    static void run(const T* x, index_t ldx, const T* w, T eps, T* y, index_t ldy, index_t rows, index_t n);
};
template <class T>
struct kernel<ops::layer_norm_op, cuda, T> {
    static void run(const T* x, index_t ldx, const T* w, const T* b, T eps, T* y, index_t ldy, index_t rows, index_t n);
};
template <class T>
struct kernel<ops::softmax_rows_op, cuda, T> {
    static void run(T* x, index_t rows, index_t n, index_t ld);
};
template <class T>
struct kernel<ops::activate_op, cuda, T> {
    template <activation Act>
    static void run(T* x, index_t count) {
        run_with(Act, x, count);
    }
    static void run_with(activation act, T* x, index_t count);
};
template <class T>
struct kernel<ops::gate_op, cuda, T> {
    template <activation Act>
    static void run(T* a, const T* b, index_t rows, index_t n, index_t ld) {
        run_with(Act, a, b, rows, n, ld);
    }
    static void run_with(activation act, T* a, const T* b, index_t rows, index_t n, index_t ld);
};
template <class T>
struct kernel<ops::mul_op, cuda, T> {
    static void run(T* y, const T* q, index_t count);
};
template <class T>
struct kernel<ops::add_rows_op, cuda, T> {
    static void run(T* y, const T* bias, index_t rows, index_t n);
};
template <class T>
struct kernel<ops::scale_rows_op, cuda, T> {
    static void run(T* y, const T* s, index_t rows, index_t n);
};
template <class T>
struct kernel<ops::embedding_op, cuda, T> {
    static void run(const T* table, index_t dim, const std::int64_t* ids, index_t n, T* out, T scale);
};
template <class T>
struct kernel<ops::add_embedding_op, cuda, T> {
    static void run(const T* table, index_t dim, const std::int64_t* ids, index_t n, T* out);
};

// dst and src must not overlap (the CPU kernel's memmove allows it within a row).
template <class T>
struct kernel<ops::strided_copy_op, cuda, T> {
    static void run(T* dst, const T* src, const ops::copy_layout& l);
};
template <class T>
struct kernel<ops::fill_op, cuda, T> {
    static void run(T* x, index_t count, T value);
};
// The same bytes as the CPU kernel writes, for float32, bfloat16 and int8 storage.
template <class T>
struct kernel<ops::store_rows_op, cuda, T> {
    static void run(ops::kv_precision p, const T* x, index_t ldx, index_t rows, index_t n, void* dst, float* scale);
};

// offsets and rows in device memory; sums in list order, as the CPU kernel.
template <class T>
struct kernel<ops::gather_sum_op, cuda, T> {
    static void run(const T* x, index_t ldx, index_t n, const std::int64_t* offsets, const std::int64_t* rows, index_t S, T* out,
                    index_t ldo);
};

// ops/rows.hpp (rows.cu): index lists and masks in device memory.
template <class T>
struct kernel<ops::add_position_rows_op, cuda, T> {
    static void run(const T* table, index_t dim, index_t first, index_t rows, index_t count, T* x);
};
template <class T>
struct kernel<ops::add_sinusoid_op, cuda, T> {
    static void run(const float* omega, index_t dim, index_t first, index_t rows, index_t count, T* x);
};
template <class T>
struct kernel<ops::key_bias_op, cuda, T> {
    static void run(const float* mask, index_t n, T* out);
};
template <class T>
struct kernel<ops::fill_at_op, cuda, T> {
    static void run(T* x, const std::int64_t* index, index_t count, T value);
};
template <class T>
struct kernel<ops::gather_rows_op, cuda, T> {
    static void run(const T* src, index_t lds, index_t n, const std::int64_t* index, index_t S, T* dst, index_t ldd);
};
template <class T>
struct kernel<ops::scatter_rows_op, cuda, T> {
    static void run(const T* src, index_t lds, index_t n, const std::int64_t* index, index_t S, T* dst, index_t ldd);
};

// problems: a host vector of descriptors whose pointers are device pointers; d at most 1024.
template <class T>
struct kernel<ops::attention_op, cuda, T> {
    static void run(const std::vector<ops::attention_problem<T>>& problems, index_t d);
};
// Exact products whatever `products` asks (no bfloat16-product path on the GPU yet); d at most 1024.
// (attention.cu says which kernel runs when; cuda_detail::attention_plan names it.)
template <class T>
struct kernel<ops::shared_kv_attention_op, cuda, T> {
    static void run(const T* q, index_t nq, index_t ldq, const ops::kv_matrix& states, index_t nk, index_t d, T* out, index_t ldo,
                    ops::attention_products products);
};

namespace cuda_detail {
// The kernel, chunking and launch that ops::attention would use for these problems (attention.cu's
// table), e.g. "attend_chunks NQ=1 LK=8 NB=1, 12 tasks in parameters, chunk 990, 8448 warps, 12
// merged rows": for tests, which check the path they reach, and benchmarks.
template <class T>
std::string attention_plan(const std::vector<ops::attention_problem<T>>& problems, index_t d);
// Keys per chunk from now on, on the calling thread (0: chosen from the work, the default): tests
// reach many-chunk merges with small inputs.
void set_attention_chunk(index_t keys);

// S4D kernels K[c, h, 0..L) for h in [h0, h1) into out[((h − h0)·channels + c)·L + l] (device),
// from the per-mode factors on the device: dtA (H, modes) and ceff (channels, H, modes), complex
// double as (re, im) pairs. The block form of layers/s4d_kernel.hpp: the powers z^j and z^(bT) are
// evaluated exactly in double, one per thread, and K is a batched GEMM over the channels.
template <class T>
void s4d_kernels(const double* dtA, const double* ceff, index_t H, index_t modes, index_t channels, index_t h0, index_t h1, index_t L,
                 T* out);

// The FFT side of the bidirectional convolution for one geometry: cuFFT plans and device buffers
// for a group of channels, reused by every group and batch row.
template <class T>
class conv_plan {
public:
    conv_plan(const ops::conv_geometry& geo, index_t L, index_t H, index_t channels);
    ~conv_plan();
    conv_plan(const conv_plan&) = delete;
    conv_plan& operator=(const conv_plan&) = delete;
    index_t group() const noexcept { return G_; }
    // Where the kernel source writes the group's time-domain kernels: (G, channels, L).
    T* kernel_buffer() noexcept { return kern_.data(); }
    // y[b, :, h0..h1) = conv(v[b, :, h0..h1)) + D ⊙ v for every batch row, with the kernels now
    // in kernel_buffer(). v and y may alias.
    void run_group(const T* v, T* y, index_t batch, index_t h0, index_t h1, const T* D);

private:
    ops::conv_geometry geo_;
    index_t L_, H_, channels_, G_;
    tensor<T, cuda> kern_, sig_;
    tensor<std::complex<T>, cuda> kspec_, spec_;
    int forward_ = 0, inverse_ = 0;  // cufftHandle
};
}  // namespace cuda_detail

template <class Scalar>
struct kernel<ops::ssm_kernels_op, cuda, Scalar> {
    template <class Kernel>
    static void run(const Kernel& k, index_t h0, index_t h1, index_t L, Scalar* out) {
        cuda_detail::s4d_kernels<Scalar>(k.backend_dtA(), k.backend_ceff(), k.hidden(), k.modes(), k.channels(), h0, h1, L, out);
    }
};

template <class Scalar>
struct kernel<ops::ssm_kernel_group_op, cuda, Scalar> {
    static constexpr bool stops_at_support = false;  // whole kernels, generated at once
    template <class Kernel>
    static void run(const Kernel& k, index_t h0, index_t h1, index_t L, Scalar* out, typename Kernel::scratch&) {
        cuda_detail::s4d_kernels<Scalar>(k.backend_dtA(), k.backend_ceff(), k.hidden(), k.modes(), k.channels(), h0, h1, L, out);
    }
};

// One group at a time: the GPU runs a group's channels in parallel, so the kernel source is
// called with thread 0 for every group.
template <class Scalar>
struct kernel<ops::bidirectional_conv_op, cuda, Scalar> {
    template <class KernelSource>
    static void run(const Scalar* v, Scalar* y, index_t batch, index_t L, index_t H, index_t channels, const Scalar* D,
                    KernelSource& kernels, const ops::conv_options& opt) {
        cuda_detail::conv_plan<Scalar> plan(ops::conv_geometry::make(L, opt), L, H, channels);
        for (index_t h0 = 0; h0 < H; h0 += plan.group()) {
            const index_t h1 = std::min(H, h0 + plan.group());
            kernels(h0, h1, L, plan.kernel_buffer(), 0);
            plan.run_group(v, y, batch, h0, h1, D);
        }
    }
};

}  // namespace locost
