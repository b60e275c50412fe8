// What the emulated CUDA runtime has been asked to do, counted since the program started: the
// host side of the backend's traffic (kernel launches, transfers each way and their bytes,
// synchronisations, driver allocations, library calls). A GPU does the same calls for the same
// program, so the counts per decoding step are the GPU's too; their cost is not (that needs a GPU).
// Plain C++ (no emulated CUDA names), so host tests may include it.
#pragma once
#include <cstdint>

namespace locost_emulator {

struct traffic_counts {
    std::uint64_t launches = 0;
    std::uint64_t host_to_device = 0, host_to_device_bytes = 0;
    std::uint64_t device_to_host = 0, device_to_host_bytes = 0;
    std::uint64_t device_to_device = 0;
    std::uint64_t synchronizations = 0;  // cudaStreamSynchronize
    std::uint64_t mallocs = 0, frees = 0;
    std::uint64_t blas_calls = 0, fft_calls = 0;
};

// The counts so far (every thread's calls together).
traffic_counts traffic();

// b − a, field by field.
inline traffic_counts operator-(const traffic_counts& b, const traffic_counts& a) {
    traffic_counts d;
    d.launches = b.launches - a.launches;
    d.host_to_device = b.host_to_device - a.host_to_device;
    d.host_to_device_bytes = b.host_to_device_bytes - a.host_to_device_bytes;
    d.device_to_host = b.device_to_host - a.device_to_host;
    d.device_to_host_bytes = b.device_to_host_bytes - a.device_to_host_bytes;
    d.device_to_device = b.device_to_device - a.device_to_device;
    d.synchronizations = b.synchronizations - a.synchronizations;
    d.mallocs = b.mallocs - a.mallocs;
    d.frees = b.frees - a.frees;
    d.blas_calls = b.blas_calls - a.blas_calls;
    d.fft_calls = b.fft_calls - a.fft_calls;
    return d;
}

}  // namespace locost_emulator
