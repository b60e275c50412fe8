// Internal to the CUDA backend's .cu files (cuda.hpp is what host code includes): every CUDA,
// cuBLAS and cuFFT call checked and turned into a locost::error naming the call, and one context
// (device, stream, cuBLAS handle) per host thread, on which every op is issued in order.
#pragma once
// (LOCOST_CUDA_EMULATOR: the same files compiled by the host compiler against tests/cuda_emulator.)
#if !defined(__CUDACC__) && !defined(LOCOST_CUDA_EMULATOR)
#error "locost/backend/cuda/runtime.cuh is internal to the CUDA backend's .cu files; host code includes locost/backend/cuda/cuda.hpp"
#endif
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cufft.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cuda.hpp"

namespace locost::cuda_detail {

inline std::string bytes_text(std::size_t b) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f GB", static_cast<double>(b) / 1e9);
    return buf;
}

// "cudaMalloc(1.50 GB): out of memory (cudaErrorMemoryAllocation)"
inline void check(cudaError_t e, const std::string& call) {
    if (e == cudaSuccess) return;
    cudaGetLastError();  // clear a sticky-free error so that the next call starts clean
    throw error("cuda.call_failed", call + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")");
}

inline const char* cublas_status_name(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "cuBLAS status";
    }
}

inline void check(cublasStatus_t s, const std::string& call) {
    if (s == CUBLAS_STATUS_SUCCESS) return;
    throw error("cuda.call_failed", call + ": " + cublas_status_name(s) + " (" + std::to_string(static_cast<int>(s)) + ")");
}

inline void check(cufftResult r, const std::string& call) {
    if (r == CUFFT_SUCCESS) return;
    throw error("cuda.call_failed",
                call + ": cuFFT error " + std::to_string(static_cast<int>(r)) +
                    (r == CUFFT_ALLOC_FAILED ? " (CUFFT_ALLOC_FAILED: out of GPU memory)" : ""));
}

// cuBLAS takes dimensions and leading dimensions as 32-bit ints.
inline void check_int_range(index_t m, index_t n, index_t k, index_t lda, index_t ldb, index_t ldc) {
    constexpr index_t int_max = 0x7fffffff;
    if (m > int_max || n > int_max || k > int_max || lda > int_max || ldb > int_max || ldc > int_max)
        throw error("cuda.gemm_too_large",
                    "GEMM of " + std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k) +
                        ": a dimension or row stride exceeds cuBLAS's 32-bit int");
}

// After a kernel launch: a bad configuration shows up here, a fault at the next synchronisation.
inline void check_launch(const char* kernel_name) { check(cudaGetLastError(), std::string("launch of ") + kernel_name); }

// A context's stream is going away: its cached blocks go back to the driver (runtime.cu).
void stream_retired(cudaStream_t stream) noexcept;

// Launches a kernel on the calling thread's stream and checks the launch.
template <class... Params, class... Args>
void launch(void (*k)(Params...), dim3 grid, unsigned threads, const char* name, Args... args);

}  // namespace locost::cuda_detail

namespace locost {

// Where the backend's work goes: a stream and a cuBLAS handle bound to it. Ops take the calling
// thread's context (cuda_context::current()); a model that wants a stream of its own makes a
// context and binds it with cuda_context::scope while it runs.
class cuda_context {
public:
    explicit cuda_context(int device = 0) : device_(device) {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) cuda_devices();  // throws device.no_gpu with the runtime's reason
        cuda_detail::check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
        cuda_detail::check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
        if (const cublasStatus_t s = cublasCreate(&blas_); s != CUBLAS_STATUS_SUCCESS) {
            cudaStreamDestroy(stream_);
            cuda_detail::check(s, "cublasCreate");
        }
        cublasSetStream(blas_, stream_);
    }
    cuda_context(const cuda_context&) = delete;
    cuda_context& operator=(const cuda_context&) = delete;
    // Waits for the stream's work first: the blocks it used may be handed to a later stream.
    ~cuda_context() {
        cudaStreamSynchronize(stream_);
        cuda_detail::stream_retired(stream_);
        cublasDestroy(blas_);
        cudaStreamDestroy(stream_);
    }

    cudaStream_t stream() const noexcept { return stream_; }
    cublasHandle_t blas() const noexcept { return blas_; }
    int device() const noexcept { return device_; }

    // Waits for everything issued on this context; a fault of an earlier kernel surfaces here.
    void synchronize(const char* after = "the CUDA backend's work") const {
        cuda_detail::check(cudaStreamSynchronize(stream_), std::string("cudaStreamSynchronize (after ") + after + ")");
    }

    // The calling thread's context: the one bound by a live scope, else a default one on
    // device 0, made on first use.
    static cuda_context& current() {
        if (bound()) return *bound();
        cuda_context*& f = fallback();
        if (!f) {
            f = new cuda_context(0);
            thread_local const fallback_owner owner;  // deletes it when the thread ends
        }
        return *f;
    }

    // The calling thread's context if it has one, without making one (a thread without one has
    // issued no work).
    static cuda_context* current_if_any() noexcept { return bound() ? bound() : fallback(); }

    // Binds a context to the calling thread for its lifetime.
    class scope {
    public:
        explicit scope(cuda_context& c) : previous_(bound()) { bound() = &c; }
        scope(const scope&) = delete;
        scope& operator=(const scope&) = delete;
        ~scope() { bound() = previous_; }

    private:
        cuda_context* previous_;
    };

private:
    static cuda_context*& bound() noexcept {
        thread_local cuda_context* c = nullptr;
        return c;
    }
    // The thread's default context, in a plain thread-local pointer that outlives its owner. At a
    // thread's end (the process's too) thread-locals go before static objects, and a tensor in
    // static storage freed after that must find no context rather than a deleted one: clearing a
    // unique_ptr in its own destructor is a store the compiler may drop (the object is dead), which
    // left the pointer dangling and made such a free synchronize a destroyed stream (a crash at exit
    // on a GPU).
    static cuda_context*& fallback() noexcept {
        thread_local cuda_context* f = nullptr;
        return f;
    }
    struct fallback_owner {
        fallback_owner() = default;
        fallback_owner(const fallback_owner&) = delete;
        fallback_owner& operator=(const fallback_owner&) = delete;
        ~fallback_owner() {
            cuda_context* c = fallback();
            fallback() = nullptr;
            delete c;
        }
    };
    int device_;
    cudaStream_t stream_{};
    cublasHandle_t blas_{};
};

}  // namespace locost

// The explicit instantiation of kernel<Op, cuda, T> for each scalar type locost_cuda is built for
// (cuda.hpp: float and double), written once per op after its definitions in a .cu file: host
// code sees only cuda.hpp's declarations, so every specialization it uses must be instantiated
// there. A macro, because an explicit instantiation names one specialization and no template can
// write one; this keeps the list of types in one place.
#define LOCOST_CUDA_OP_KERNEL(Op)                                                                                                          \
    template struct kernel<Op, cuda, float>;                                                                                               \
    template struct kernel<Op, cuda, double>

namespace locost::cuda_detail {
template <class... Params, class... Args>
void launch(void (*k)(Params...), dim3 grid, unsigned threads, const char* name, Args... args) {
#if defined(LOCOST_CUDA_EMULATOR)
    locost_emulator::launch(grid, threads, cuda_context::current().stream(), [&] { k(static_cast<Params>(args)...); });
#else
    k<<<grid, threads, 0, cuda_context::current().stream()>>>(static_cast<Params>(args)...);
#endif
    check_launch(name);
}

// V (uint2, uint4) read from device memory at p, which the caller knows is aligned to sizeof(V):
// one vector load on a GPU (the emulator copies the bytes, which the host compiler's aliasing
// rules allow).
template <class V>
__device__ inline V load_vector(const void* p) {
#if defined(LOCOST_CUDA_EMULATOR)
    V v;
    std::memcpy(&v, p, sizeof(V));
    return v;
#else
    return *static_cast<const V*>(p);
#endif
}
}  // namespace locost::cuda_detail
