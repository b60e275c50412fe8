// Element types of stored tensors and the exact conversions to float32.
//
// Compute is float32. float16 and bfloat16 exist only as storage: checkpoints in those
// formats are widened to float32 on load (exact: every f16/bf16 value is a float32 value),
// and the writer can narrow float32 with round-to-nearest-even.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#endif

namespace locost {

enum class dtype : std::uint8_t { f32, f16, bf16, f64, i64, i32, i16, i8, u8, boolean };

constexpr std::size_t size_of(dtype t) noexcept {
    switch (t) {
    case dtype::f64:
    case dtype::i64: return 8;
    case dtype::f32:
    case dtype::i32: return 4;
    case dtype::f16:
    case dtype::bf16:
    case dtype::i16: return 2;
    case dtype::i8:
    case dtype::u8:
    case dtype::boolean: return 1;
    }
    return 0;
}

// Names as the safetensors format spells them.
constexpr std::string_view safetensors_name(dtype t) noexcept {
    switch (t) {
    case dtype::f32: return "F32";
    case dtype::f16: return "F16";
    case dtype::bf16: return "BF16";
    case dtype::f64: return "F64";
    case dtype::i64: return "I64";
    case dtype::i32: return "I32";
    case dtype::i16: return "I16";
    case dtype::i8: return "I8";
    case dtype::u8: return "U8";
    case dtype::boolean: return "BOOL";
    }
    return "?";
}

constexpr std::optional<dtype> dtype_from_safetensors_name(std::string_view s) noexcept {
    for (dtype t :
         {dtype::f32, dtype::f16, dtype::bf16, dtype::f64, dtype::i64, dtype::i32, dtype::i16, dtype::i8, dtype::u8, dtype::boolean})
        if (safetensors_name(t) == s) return t;
    return std::nullopt;
}

constexpr bool is_floating(dtype t) noexcept { return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16 || t == dtype::f64; }

inline float bf16_to_float(std::uint16_t h) noexcept { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

inline float f16_to_float(std::uint16_t h) noexcept {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    std::uint32_t exp = (h >> 10) & 0x1fu;
    std::uint32_t man = h & 0x3ffu;
    std::uint32_t bits;
    if (exp == 0x1f) {  // inf / nan
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {  // normal
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {  // signed zero
        bits = sign;
    } else {  // subnormal: renormalise
        exp = 113;
        while ((man & 0x400u) == 0) {
            man <<= 1;
            --exp;
        }
        bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
    }
    return std::bit_cast<float>(bits);
}

// x rounded to an integer, ties to even (nearbyint's result in the default rounding mode), for
// |x| < 2^31; NaN gives −2^31 on x86 (its callers clamp to the int8 range) and NaN elsewhere. The
// int8 roundings of weights at load, of queries and rows, element by element. x86-64: cvtss2si,
// one instruction at the baseline (nearbyint is a call there: roundss is SSE4.1). Elsewhere
// nearbyint, one instruction that GCC vectorizes (aarch64: frinti). Not the trick
// (x + 1.5·2^23) − 1.5·2^23: where FMA is enabled (aarch64 always, x86 under -march=native or in
// the AVX2/AVX-512 kernels) GCC contracts round_half_even(a·b) into fma(a, b, 1.5·2^23), which
// rounds the exact product, not the float one, and differs at ties (int8 products were one step
// off under qemu-aarch64).
inline float round_half_even(float x) noexcept {
#if defined(__x86_64__) || defined(_M_X64)
    return static_cast<float>(_mm_cvtss_si32(_mm_set_ss(x)));
#else
    return std::nearbyint(x);
#endif
}

// Round to nearest even; NaN stays NaN.
inline std::uint16_t float_to_bf16(float f) noexcept {
    std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<std::uint16_t>(u >> 16);
}

// Round to nearest even, overflow to inf, gradual underflow.
inline std::uint16_t float_to_f16(float f) noexcept {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
    const std::uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // nan
    if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520 -> inf
    if (a < 0x38800000u) {                                                    // subnormal or 0
        if (a < 0x33000000u) return sign;                                     // < 2^-25 -> 0
        const std::uint32_t e = a >> 23;
        const std::uint32_t m = (a & 0x7fffffu) | 0x800000u;
        const std::uint32_t shift = 126u - e;  // 14..24
        std::uint32_t r = m >> shift;
        const std::uint32_t rem = m & ((1u << shift) - 1u);
        const std::uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u))) ++r;
        return static_cast<std::uint16_t>(sign | r);
    }
    std::uint32_t r = a - 0x38000000u;  // rebias 127 -> 15
    r += 0xfffu + ((r >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (r >> 13));
}

// Widen n stored 16-bit values (little-endian bytes, at any alignment) to float32 with Widen.
template <float (*Widen)(std::uint16_t) noexcept>
void widen_16bit_n(const void* src, float* dst, std::size_t n) noexcept {
    const auto* b = static_cast<const unsigned char*>(src);
    for (std::size_t i = 0; i < n; ++i) {
        std::uint16_t h;
        std::memcpy(&h, b + 2 * i, 2);
        dst[i] = Widen(h);
    }
}

// Widen n stored float16 / bfloat16 values (little-endian bytes) to float32.
inline void f16_to_f32_n(const void* src, float* dst, std::size_t n) noexcept { widen_16bit_n<f16_to_float>(src, dst, n); }
inline void bf16_to_f32_n(const void* src, float* dst, std::size_t n) noexcept { widen_16bit_n<bf16_to_float>(src, dst, n); }

// Widen n stored elements of type t (little-endian bytes) to float32.
// Returns false for a dtype that has no float32 meaning here (integers, bool).
inline bool convert_to_f32(dtype t, const void* src, float* dst, std::size_t n) noexcept {
    switch (t) {
    case dtype::f32: std::memcpy(dst, src, n * 4); return true;
    case dtype::f16: f16_to_f32_n(src, dst, n); return true;
    case dtype::bf16: bf16_to_f32_n(src, dst, n); return true;
    case dtype::f64: {
        const auto* b = static_cast<const unsigned char*>(src);
        for (std::size_t i = 0; i < n; ++i) {
            double d;
            std::memcpy(&d, b + 8 * i, 8);
            dst[i] = static_cast<float>(d);
        }
        return true;
    }
    default: return false;
    }
}

}  // namespace locost
