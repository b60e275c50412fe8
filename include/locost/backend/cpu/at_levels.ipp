// Compiles the kernel bodies of the file LOCOST_LEVEL_BODY names (a quoted file name, defined by
// the includer just before) once per level namespace of simd_levels.hpp: cpu_detail::at_build at
// the build's own width, and, where the compiler has target regions (isa.hpp), at_avx512 and
// at_avx2 inside theirs. LOCOST_LEVEL_AVX512 is 1 while the body is compiled with AVX-512 (at
// at_avx512, or at the build's width in an AVX-512 build), so a body may add what only that width
// has. Included inside namespace locost::cpu_detail; no include guard, on purpose.
// LOCOST_RETURN_AT_LEVEL (simd_levels.hpp) calls a body's function at the process's level.

#if defined(__AVX512F__) && defined(__AVX512DQ__)
#define LOCOST_LEVEL_AVX512 1
#else
#define LOCOST_LEVEL_AVX512 0
#endif
namespace at_build {
#include LOCOST_LEVEL_BODY
}  // namespace at_build
#undef LOCOST_LEVEL_AVX512

#if LOCOST_ISA_REGIONS
#define LOCOST_LEVEL_AVX512 1
LOCOST_BEGIN_ISA_AVX512
namespace at_avx512 {
#include LOCOST_LEVEL_BODY
}  // namespace at_avx512
LOCOST_END_ISA
#undef LOCOST_LEVEL_AVX512

#define LOCOST_LEVEL_AVX512 0
LOCOST_BEGIN_ISA_AVX2
namespace at_avx2 {
#include LOCOST_LEVEL_BODY
}  // namespace at_avx2
LOCOST_END_ISA
#undef LOCOST_LEVEL_AVX512
#endif

#undef LOCOST_LEVEL_BODY
