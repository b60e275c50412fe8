// What a program needs to know about the devices it may run on, without any CUDA header: the
// command-line tool's --device flag and `locost inspect --device cuda` use these types from
// host-only translation units; backend/cuda/runtime.cuh fills them in under nvcc.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "../config/choice.hpp"

namespace locost {

enum class device_kind { cpu, cuda };
inline constexpr choice device_kind_names[] = {{"cpu", int(device_kind::cpu)}, {"cuda", int(device_kind::cuda)}};

inline const char* device_name(device_kind d) noexcept { return d == device_kind::cuda ? "cuda" : "cpu"; }

// One GPU as the CUDA runtime reports it.
struct gpu_properties {
    int index = 0;
    std::string name;
    int compute_major = 0, compute_minor = 0;
    std::size_t free_bytes = 0, total_bytes = 0;
    int multiprocessors = 0;
};

}  // namespace locost
