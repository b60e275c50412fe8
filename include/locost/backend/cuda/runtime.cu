// The CUDA backend's runtime side: devices, memory, transfers.
#include <cstdlib>
#include <string>

#include "../block_cache.hpp"
#include "runtime.cuh"

namespace locost {

std::vector<gpu_properties> cuda_devices() {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        cudaGetLastError();
        const std::string why = e != cudaSuccess ? std::string(cudaGetErrorString(e)) + " (" + cudaGetErrorName(e) + ")"
                                                 : std::string("the runtime reports 0 devices");
        throw error("device.no_gpu", "--device cuda: no CUDA device is available: cudaGetDeviceCount: " + why);
    }
    std::vector<gpu_properties> out;
    int previous = 0;
    cuda_detail::check(cudaGetDevice(&previous), "cudaGetDevice");
    for (int i = 0; i < n; ++i) {
        cudaDeviceProp p{};
        cuda_detail::check(cudaGetDeviceProperties(&p, i), "cudaGetDeviceProperties(" + std::to_string(i) + ")");
        gpu_properties g;
        g.index = i;
        g.name = p.name;
        g.compute_major = p.major;
        g.compute_minor = p.minor;
        g.multiprocessors = p.multiProcessorCount;
        cuda_detail::check(cudaSetDevice(i), "cudaSetDevice(" + std::to_string(i) + ")");
        cuda_detail::check(cudaMemGetInfo(&g.free_bytes, &g.total_bytes), "cudaMemGetInfo(device " + std::to_string(i) + ")");
        out.push_back(std::move(g));
    }
    cuda_detail::check(cudaSetDevice(previous), "cudaSetDevice(" + std::to_string(previous) + ")");
    return out;
}

namespace cuda_detail {

namespace {
// Why the calling thread's last cudaMalloc failed: out of memory, or an earlier fault that the
// runtime reports at the next call (which must not be told as out of memory).
thread_local cudaError_t last_refusal = cudaSuccess;

// cudaMalloc as the block cache's driver: nullptr (and the runtime's error cleared) when refused.
struct cuda_driver {
    void* allocate(std::size_t bytes) noexcept {
        void* p = nullptr;
        if (const cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) {
            cudaGetLastError();
            last_refusal = e;
            return nullptr;
        }
        return p;
    }
    void release(void* p) noexcept { cudaFree(p); }
};

using device_cache = detail::block_cache<cuda_driver>;

// One cache for the process, never destroyed: tensors in static storage may be freed after any
// static object of this file would have been, and the driver takes the memory back at exit.
device_cache& cache() {
    static device_cache* c = [] {
        const char* off = std::getenv("LOCOST_CUDA_NO_CACHE");
        return new device_cache(cuda_driver{}, !(off && *off && std::string(off) != "0"));
    }();
    return *c;
}
}  // namespace

device_memory_stats memory_stats() {
    const auto s = cache().stats();
    device_memory_stats out;
    out.current = s.in_use;
    out.peak = s.peak_in_use;
    out.reserved = s.reserved;
    out.peak_reserved = s.peak_reserved;
    out.cached = s.cached;
    return out;
}

void reset_peak_memory() { cache().reset_peaks(); }

void release_cached_memory() {
    synchronize();
    cache().release_cached();
}

void stream_retired(cudaStream_t stream) noexcept { cache().release_stream(stream); }

void* device_allocate(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    auto& ctx = cuda_context::current();  // the device is chosen (and a missing one reported) before allocating
    last_refusal = cudaSuccess;
    if (void* p = cache().allocate(bytes, ctx.stream())) return p;
    if (last_refusal != cudaErrorMemoryAllocation) check(last_refusal, "cudaMalloc(" + bytes_text(bytes) + ")");
    std::size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    cudaGetLastError();
    const auto s = cache().stats();
    throw error("cuda.out_of_memory",
                "cudaMalloc(" + bytes_text(bytes) + "): out of memory; the GPU has " + bytes_text(free_b) + " free of " +
                    bytes_text(total_b) + ", locost holds " + bytes_text(s.in_use) + " in tensors (cached blocks released)");
}

// The block goes back to the free list of the stream it was allocated on, whose later work may
// reuse it at once; so when this thread's stream is another one, its work (which may still read
// or write the block) is waited for first. This happens when a tensor made on one thread is freed
// on another (a model loaded and dropped on one thread, run on others), not on any hot path.
void device_free(void* p) noexcept {
    if (!p) return;
    if (cuda_context* ctx = cuda_context::current_if_any(); ctx && cache().stream_of(p) != ctx->stream())
        cudaStreamSynchronize(ctx->stream());
    cache().free(p);
}

void upload(void* dst, const void* src, std::size_t bytes) {
    if (!bytes) return;
    auto& ctx = cuda_context::current();
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx.stream()),
          "cudaMemcpyAsync(host to device, " + bytes_text(bytes) + ")");
    ctx.synchronize("a host-to-device copy");  // the host buffer may go away on return
}

void download(void* dst, const void* src, std::size_t bytes) {
    if (!bytes) return;
    auto& ctx = cuda_context::current();
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx.stream()),
          "cudaMemcpyAsync(device to host, " + bytes_text(bytes) + ")");
    ctx.synchronize("a device-to-host copy");
}

void copy(void* dst, const void* src, std::size_t bytes) {
    if (!bytes) return;
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda_context::current().stream()),
          "cudaMemcpyAsync(device to device)");
}

void copy_2d(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch, std::size_t width, std::size_t rows) {
    if (!width || !rows) return;
    check(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDeviceToDevice, cuda_context::current().stream()),
          "cudaMemcpy2DAsync(device to device)");
}

void synchronize() { cuda_context::current().synchronize(); }

gpu_timer::gpu_timer() {
    cudaEvent_t b = nullptr, e = nullptr;
    check(cudaEventCreate(&b), "cudaEventCreate");
    if (const cudaError_t r = cudaEventCreate(&e); r != cudaSuccess) {
        cudaEventDestroy(b);
        check(r, "cudaEventCreate");
    }
    begin_ = b, end_ = e;
}

gpu_timer::~gpu_timer() {
    cudaEventDestroy(static_cast<cudaEvent_t>(begin_));
    cudaEventDestroy(static_cast<cudaEvent_t>(end_));
}

void gpu_timer::start() { check(cudaEventRecord(static_cast<cudaEvent_t>(begin_), cuda_context::current().stream()), "cudaEventRecord"); }

double gpu_timer::stop_ms() {
    check(cudaEventRecord(static_cast<cudaEvent_t>(end_), cuda_context::current().stream()), "cudaEventRecord");
    check(cudaEventSynchronize(static_cast<cudaEvent_t>(end_)), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(begin_), static_cast<cudaEvent_t>(end_)), "cudaEventElapsedTime");
    return ms;
}

}  // namespace cuda_detail
}  // namespace locost
