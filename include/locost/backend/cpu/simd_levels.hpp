// Float vectors for the kernels compiled at several levels in one build (isa.hpp). Each of three
// namespaces holds the same names — fvec (the vector), flanes (its floats), fma_v, hadd_v,
// widen (flanes stored weights, float, bfloat16 or int8, widened exactly), widen_one and
// in_register — so that a kernel body written once against them compiles at each level inside
// its namespace:
//   cpu_detail        xsimd's batch at the build's own width (SSE2 in a portable x86-64 build,
//                     NEON on aarch64, AVX-512 under -march=native on such a machine);
//   cpu_detail::at_avx2, cpu_detail::at_avx512
//                     8 and 16 lanes of AVX2 / AVX-512 intrinsics inside target regions, whatever
//                     the build's -march (x86 with GCC or clang only).
// at_levels.ipp compiles a file of such bodies in each namespace; LOCOST_RETURN_AT_LEVEL (below)
// calls one at the process's level. A namespace whose level the build already compiles for is
// never called: the build's own copy runs there.
#pragma once
#include <cstdint>
#include <xsimd/xsimd.hpp>

#include "../../core/dtype.hpp"
#include "isa.hpp"

namespace locost {

namespace cpu_detail {

using fvec = xsimd::batch<float>;
inline constexpr index_t flanes = static_cast<index_t>(fvec::size);

// flanes stored weights starting at p, widened to float exactly. (Templates, so that only the
// branch of the vector width this build uses is instantiated.)
template <class V = fvec>
V widen(const std::int8_t* p) {
#if defined(__AVX512F__)
    if constexpr (V::size == 16) return V(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))));
#endif
#if defined(__AVX2__)
    if constexpr (V::size == 8) return V(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))));
#endif
    alignas(64) float t[V::size];
    for (std::size_t i = 0; i < V::size; ++i) t[i] = static_cast<float>(p[i]);
    return V::load_aligned(t);
}

template <class V = fvec>
V widen(const std::uint16_t* p) {
#if defined(__AVX512F__)
    if constexpr (V::size == 16)
        return V(
            _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16)));
#endif
#if defined(__AVX2__)
    if constexpr (V::size == 8)
        return V(_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16)));
#endif
    alignas(64) float t[V::size];
    for (std::size_t i = 0; i < V::size; ++i) t[i] = bf16_to_float(p[i]);
    return V::load_aligned(t);
}

template <class V = fvec>
V widen(const float* p) {
    return V::load_unaligned(p);
}

// v, kept in a register: GCC otherwise folds a loaded vector into every instruction that uses
// it, loading it again for each (one load per multiply-add instead of one per C of them, which
// makes the few-rows kernel load-bound).
inline fvec in_register(fvec v) {
    auto r = static_cast<typename fvec::register_type>(v);
    LOCOST_KEEP_IN_REGISTER(r);
    return fvec(r);
}

inline fvec fma_v(fvec a, fvec b, fvec c) { return xsimd::fma(a, b, c); }
inline float hadd_v(fvec a) { return xsimd::hadd(a); }
inline fvec max_v(fvec a, fvec b) { return xsimd::max(a, b); }
inline fvec exp_v(fvec x) { return xsimd::exp(x); }

inline float widen_one(float v) { return v; }
inline float widen_one(std::int8_t v) { return static_cast<float>(v); }
inline float widen_one(std::uint16_t v) { return bf16_to_float(v); }

#if LOCOST_ISA_REGIONS
LOCOST_BEGIN_ISA_AVX512
namespace at_avx512 {

struct fvec {
    using register_type = __m512;
    static constexpr std::size_t size = 16;
    __m512 data;
    fvec() = default;
    fvec(float x) : data(_mm512_set1_ps(x)) {}
    explicit fvec(__m512 r) : data(r) {}
    explicit operator __m512() const { return data; }
    static fvec load_unaligned(const float* p) { return fvec(_mm512_loadu_ps(p)); }
    void store_unaligned(float* p) const { _mm512_storeu_ps(p, data); }
};
// (Outside the class: GCC does not apply the region's target to a friend defined in it.)
inline fvec operator*(fvec a, fvec b) { return fvec(_mm512_mul_ps(a.data, b.data)); }
inline fvec operator+(fvec a, fvec b) { return fvec(_mm512_add_ps(a.data, b.data)); }
inline fvec operator-(fvec a, fvec b) { return fvec(_mm512_sub_ps(a.data, b.data)); }
inline fvec operator/(fvec a, fvec b) { return fvec(_mm512_div_ps(a.data, b.data)); }
inline fvec max_v(fvec a, fvec b) { return fvec(_mm512_max_ps(a.data, b.data)); }
// e^x within ~2 ulp: x = n·ln 2 + r, |r| ≤ ln 2 / 2 (ln 2 in two parts, so r is exact), e^r by its
// Taylor polynomial to r^6, 2^n applied by scalef (overflow to +inf, underflow to 0 on its own).
// (max and min return their second operand when one is NaN: x last, so that NaN stays NaN.)
inline fvec exp_v(fvec x) {
    const __m512 xc = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x.data));
    const __m512 n =
        _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.4286068202862268e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    for (float c : {1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f}) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
    return fvec(_mm512_scalef_ps(p, n));
}
inline constexpr index_t flanes = 16;

inline fvec fma_v(fvec a, fvec b, fvec c) { return fvec(_mm512_fmadd_ps(a.data, b.data, c.data)); }
// (the lanes summed by halves: GCC 12 warns inside _mm512_reduce_add_ps)
inline float hadd_v(fvec a) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(a.data), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a.data), 1)));
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 e = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(e, _mm_movehdup_ps(e)));
}
inline fvec widen(const std::int8_t* p) {
    return fvec(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))));
}
inline fvec widen(const std::uint16_t* p) {
    return fvec(_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16)));
}
inline fvec widen(const float* p) { return fvec::load_unaligned(p); }
inline fvec in_register(fvec v) {
    asm("" : "+v"(v.data));
    return v;
}

}  // namespace at_avx512
LOCOST_END_ISA

LOCOST_BEGIN_ISA_AVX2
namespace at_avx2 {

struct fvec {
    using register_type = __m256;
    static constexpr std::size_t size = 8;
    __m256 data;
    fvec() = default;
    fvec(float x) : data(_mm256_set1_ps(x)) {}
    explicit fvec(__m256 r) : data(r) {}
    explicit operator __m256() const { return data; }
    static fvec load_unaligned(const float* p) { return fvec(_mm256_loadu_ps(p)); }
    void store_unaligned(float* p) const { _mm256_storeu_ps(p, data); }
};
// (Outside the class: GCC does not apply the region's target to a friend defined in it.)
inline fvec operator*(fvec a, fvec b) { return fvec(_mm256_mul_ps(a.data, b.data)); }
inline fvec operator+(fvec a, fvec b) { return fvec(_mm256_add_ps(a.data, b.data)); }
inline fvec operator-(fvec a, fvec b) { return fvec(_mm256_sub_ps(a.data, b.data)); }
inline fvec operator/(fvec a, fvec b) { return fvec(_mm256_div_ps(a.data, b.data)); }
inline fvec max_v(fvec a, fvec b) { return fvec(_mm256_max_ps(a.data, b.data)); }
// e^x as at_avx512's, 2^n built in the exponent bits: x is held to [−87.3, 88] so that n stays a
// normal exponent; below −87.3 the result is 0 (a softmax's masked −∞ scores), above 88 it
// saturates at e^88 instead of +inf. NaN stays NaN.
inline fvec exp_v(fvec x) {
    const __m256 xc = _mm256_min_ps(_mm256_set1_ps(88.0f), _mm256_max_ps(_mm256_set1_ps(-87.3f), x.data));
    const __m256 n =
        _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.4286068202862268e-06f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720);
    for (float c : {1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f}) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    const __m256 underflow = _mm256_cmp_ps(x.data, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
    return fvec(_mm256_andnot_ps(underflow, _mm256_mul_ps(p, _mm256_castsi256_ps(e))));
}
inline constexpr index_t flanes = 8;

inline fvec fma_v(fvec a, fvec b, fvec c) { return fvec(_mm256_fmadd_ps(a.data, b.data, c.data)); }
inline float hadd_v(fvec a) {
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(a.data), _mm256_extractf128_ps(a.data, 1));
    const __m128 e = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(e, _mm_movehdup_ps(e)));
}
inline fvec widen(const std::int8_t* p) {
    return fvec(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))));
}
inline fvec widen(const std::uint16_t* p) {
    return fvec(_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16)));
}
inline fvec widen(const float* p) { return fvec::load_unaligned(p); }
inline fvec in_register(fvec v) {
    asm("" : "+v"(v.data));
    return v;
}

}  // namespace at_avx2
LOCOST_END_ISA
#endif

// `return NS::CALL;` for the call given, NS being the namespace of the process's level: at_avx512
// or at_avx2 where that level is above what the build compiles for, else at_build (the copies
// at_levels.ipp compiles). Used inside namespace locost::cpu_detail.
#if LOCOST_ISA_REGIONS
#define LOCOST_RETURN_AT_LEVEL(...)                                                                                                        \
    do {                                                                                                                                   \
        if constexpr (compiled_isa_level() < isa_level::avx512)                                                                            \
            if (isa_at_least(isa_level::avx512)) return at_avx512::__VA_ARGS__;                                                            \
        if constexpr (compiled_isa_level() < isa_level::avx2)                                                                              \
            if (isa_at_least(isa_level::avx2)) return at_avx2::__VA_ARGS__;                                                                \
        return at_build::__VA_ARGS__;                                                                                                      \
    } while (false)
#else
#define LOCOST_RETURN_AT_LEVEL(...) return at_build::__VA_ARGS__
#endif

// The floats of a vector at the process's level: what the kernels compiled at several levels
// (linear_rows.ipp, attention_few_rows.ipp, fold_tiles.ipp) run with, and what their callers'
// shape conditions use.
inline index_t level_flanes() noexcept {
#if LOCOST_ISA_REGIONS
    if constexpr (compiled_isa_level() < isa_level::avx512)
        if (isa_at_least(isa_level::avx512)) return at_avx512::flanes;
    if constexpr (compiled_isa_level() < isa_level::avx2)
        if (isa_at_least(isa_level::avx2)) return at_avx2::flanes;
#endif
    return flanes;
}

}  // namespace cpu_detail

}  // namespace locost
