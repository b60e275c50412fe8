// The CUDA backend's runtime side: devices, memory, transfers.
#include <mutex>
#include <unordered_map>

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
// Sizes of live allocations (cudaFree does not say), for memory_stats().
struct allocation_book {
    std::mutex m;
    std::unordered_map<void*, std::size_t> sizes;
    std::size_t current = 0, peak = 0;
};
allocation_book& book() {
    static allocation_book b;
    return b;
}
} // namespace

device_memory_stats memory_stats() {
    auto& b = book();
    const std::lock_guard<std::mutex> lock(b.m);
    return {b.current, b.peak};
}

void reset_peak_memory() {
    auto& b = book();
    const std::lock_guard<std::mutex> lock(b.m);
    b.peak = b.current;
}

void* device_allocate(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    cuda_context::current();  // the device is chosen (and a missing one reported) before allocating
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();
        std::size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        throw error("cuda.out_of_memory", "cudaMalloc(" + bytes_text(bytes) + "): " + cudaGetErrorString(e) + "; the GPU has " +
                                              bytes_text(free_b) + " free of " + bytes_text(total_b));
    }
    auto& b = book();
    const std::lock_guard<std::mutex> lock(b.m);
    b.sizes[p] = bytes;
    b.current += bytes;
    b.peak = std::max(b.peak, b.current);
    return p;
}

void device_free(void* p) noexcept {
    if (!p) return;
    cudaFree(p);
    auto& b = book();
    const std::lock_guard<std::mutex> lock(b.m);
    if (const auto it = b.sizes.find(p); it != b.sizes.end()) {
        b.current -= it->second;
        b.sizes.erase(it);
    }
}

void upload(void* dst, const void* src, std::size_t bytes) {
    if (!bytes) return;
    auto& ctx = cuda_context::current();
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx.stream()), "cudaMemcpyAsync(host to device, " + bytes_text(bytes) + ")");
    ctx.synchronize("a host-to-device copy");  // the host buffer may go away on return
}

void download(void* dst, const void* src, std::size_t bytes) {
    if (!bytes) return;
    auto& ctx = cuda_context::current();
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx.stream()), "cudaMemcpyAsync(device to host, " + bytes_text(bytes) + ")");
    ctx.synchronize("a device-to-host copy");
}

void copy(void* dst, const void* src, std::size_t bytes) {
    if (!bytes) return;
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda_context::current().stream()), "cudaMemcpyAsync(device to device)");
}

void copy_2d(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch, std::size_t width, std::size_t rows) {
    if (!width || !rows) return;
    check(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDeviceToDevice, cuda_context::current().stream()),
          "cudaMemcpy2DAsync(device to device)");
}

void synchronize() { cuda_context::current().synchronize(); }

} // namespace cuda_detail
} // namespace locost
