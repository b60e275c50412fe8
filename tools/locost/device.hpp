// --device cpu|cuda. The GPU is reached through cuda_devices(), defined in cuda_device.cpp (the
// locost::locost_cuda library) when the tool is built with -DLOCOST_CUDA=ON and in no_cuda.cpp
// otherwise: CMake picks one file, no #ifdef here.
#pragma once
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "args.hpp"

namespace locost::cli {

// The GPUs, or a locost::error: device.no_cuda_build (the tool was built without CUDA),
// device.no_gpu (no device or no driver, with the runtime's reason).
std::vector<gpu_properties> cuda_devices();

inline const std::set<std::string> device_valued = {"device"};

inline std::string device_help() { return options::help_text_of({options::find("device")}); }

inline device_kind read_device(const args& a, const std::string& /*command*/) {
    // (a name checked as it arrived)
    device_kind d = device_kind::cpu;
    if (a.has("device")) enum_of(device_kind_names, a.get("device", "cpu"), d);
    return d;
}

inline std::string describe(const gpu_properties& g) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "cuda:%d %s, compute capability %d.%d, %d multiprocessors, %.2f GB free of %.2f GB", g.index,
                  g.name.c_str(), g.compute_major, g.compute_minor, g.multiprocessors, static_cast<double>(g.free_bytes) / 1e9,
                  static_cast<double>(g.total_bytes) / 1e9);
    return buf;
}

// "; GPU memory peak 6.71 GB held (6.52 GB in tensors)" since the process started: what the run
// took of the GPU's memory (cuda_device.cpp; no_cuda.cpp: device.no_cuda_build).
std::string gpu_memory_note();

// The end of a closing line: on the CPU "; float32 GEMM oneDNN sgemm (avx512_core_bf16, AVX-512);
// kernels avx512-vnni" (which library its speed came from, and the level of locost's own kernels),
// on a GPU the GPU memory it took.
inline std::string gemm_note(const args& a, const std::string& command) {
    if (read_device(a, command) != device_kind::cpu) return gpu_memory_note();
    return "; float32 GEMM " + float32_gemm().describe() + "; kernels " + std::string(isa_level_name(kernels_isa()));
}

// encode, score, generate, summarize: checked before any input is read or weight loaded. With
// --device cuda, the GPU the model will run on is named on stderr; no GPU (or a tool built without
// CUDA) is an error here, before any work.
inline void require_model_device(const args& a, const std::string& command) {
    if (read_device(a, command) == device_kind::cpu) return;
    const auto gpus = cuda_devices();
    std::fprintf(stderr, "%s: running on %s\n", command.c_str(), describe(gpus.front()).c_str());
}

}  // namespace locost::cli
