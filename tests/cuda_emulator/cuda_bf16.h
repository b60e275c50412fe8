// bfloat16 as tests/cuda_emulator emulates it on the host (see emulator.hpp): the bit layout, and
// __float2bfloat16_rn's rounding to nearest even with a canonical NaN.
#pragma once
#include <cstdint>

#include "emulator.hpp"

struct __nv_bfloat16 {
    std::uint16_t bits;
};

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    std::uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return {0x7fff};
    u += 0x7fffu + ((u >> 16) & 1u);
    return {static_cast<std::uint16_t>(u >> 16)};
}

inline float __bfloat162float(__nv_bfloat16 b) { return __uint_as_float(static_cast<std::uint32_t>(b.bits) << 16); }
