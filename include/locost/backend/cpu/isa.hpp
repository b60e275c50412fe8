// The vector ISA level of the CPU backend's own kernels, chosen once per process at run time.
//
// One build runs on every x86-64 CPU: the kernels written with intrinsics (the int8 and bfloat16
// tiles of the folded and cached attention, the int8 and bfloat16 roundings, the softmax's
// exponentials) are compiled for their level inside a target region (LOCOST_BEGIN_ISA_* below:
// GCC's `#pragma GCC target`, clang's `#pragma clang attribute`) whatever the build's -march,
// and run only where cpu_detail::isa_at_least() says so. The level is
//   min(the CPU's level, LOCOST_ISA)    where LOCOST_ISA ∈ baseline|avx2|avx512|avx512-vnni|amx,
// never above what the CPU (and its operating system, for the AVX-512 and AMX register state)
// has, and never below what the build was compiled for (-march=native compiles every kernel for
// this machine, so nothing lower can run). The level names:
//   baseline     x86-64 (SSE2); every other architecture (aarch64: NEON)
//   avx2         AVX2, FMA and F16C
//   avx512       AVX-512 F, CD, BW, DQ and VL
//   avx512-vnni  the above with AVX512-VNNI (int8 dot products); the bfloat16 tiles also need
//                AVX512-BF16, which they check on their own (Ice Lake has VNNI without it)
//   amx          the above with AMX tiles that Linux lets this process use; no kernel of
//                locost's own uses AMX (oneDNN's do): its kernels are avx512-vnni's.
//
// Why not xsimd's dispatch: xsimd (8.1, Debian 12) enables an architecture's batch types only
// where the compiler flags of the translation unit enable it (__AVX2__, __AVX512F__), so its
// dispatch needs one translation unit per architecture; a header-only library has none of its
// own. Intrinsics under a target region compile in any translation unit.
#pragma once
#include <algorithm>
#include <array>
#include <cstdlib>
#include <string>
#include <string_view>

#include "../../config/error.hpp"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
// The kernels of the target regions exist in this build (x86 with GCC or clang).
#define LOCOST_ISA_REGIONS 1
#if defined(__clang__)
#define LOCOST_BEGIN_ISA_AVX2 _Pragma("clang attribute push(__attribute__((target(\"avx2,fma,f16c\"))), apply_to = function)")
#define LOCOST_BEGIN_ISA_AVX512                                                                                                            \
    _Pragma(                                                                                                                               \
        "clang attribute push(__attribute__((target(\"avx512f,avx512cd,avx512bw,avx512dq,avx512vl,avx2,fma,f16c\"))), apply_to = function)")
#define LOCOST_BEGIN_ISA_AVX512_VNNI                                                                                                       \
    _Pragma(                                                                                                                               \
        "clang attribute push(__attribute__((target(\"avx512f,avx512cd,avx512bw,avx512dq,avx512vl,avx2,fma,f16c,avx512vnni\"))), apply_to = function)")
#define LOCOST_BEGIN_ISA_AVX512_BF16                                                                                                       \
    _Pragma(                                                                                                                               \
        "clang attribute push(__attribute__((target(\"avx512f,avx512cd,avx512bw,avx512dq,avx512vl,avx2,fma,f16c,avx512vnni,avx512bf16\"))), apply_to = function)")
#define LOCOST_END_ISA _Pragma("clang attribute pop")
#else
// (GCC 12 reports -W[maybe-]uninitialized inside its own intrinsics, on the _mm*_undefined_* they
// start from, when they are inlined into a target region (GCC bug 105593, fixed in GCC 13), and
// -Wpsabi on the function-pointer thunk of a lambda taking vectors, which never runs: about two
// hundred false warnings for a user who compiles with -Wall. The regions silence these warnings,
// and only them.)
#define LOCOST_ISA_QUIET                                                                                                                   \
    _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")                                                   \
        _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"") _Pragma("GCC diagnostic ignored \"-Wpsabi\"")
#define LOCOST_BEGIN_ISA_AVX2 LOCOST_ISA_QUIET _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma,f16c\")")
#define LOCOST_BEGIN_ISA_AVX512                                                                                                            \
    LOCOST_ISA_QUIET _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512cd,avx512bw,avx512dq,avx512vl,avx2,fma,f16c\")")
#define LOCOST_BEGIN_ISA_AVX512_VNNI                                                                                                       \
    LOCOST_ISA_QUIET _Pragma("GCC push_options")                                                                                           \
        _Pragma("GCC target(\"avx512f,avx512cd,avx512bw,avx512dq,avx512vl,avx2,fma,f16c,avx512vnni\")")
#define LOCOST_BEGIN_ISA_AVX512_BF16                                                                                                       \
    LOCOST_ISA_QUIET _Pragma("GCC push_options")                                                                                           \
        _Pragma("GCC target(\"avx512f,avx512cd,avx512bw,avx512dq,avx512vl,avx2,fma,f16c,avx512vnni,avx512bf16\")")
#define LOCOST_END_ISA _Pragma("GCC pop_options") _Pragma("GCC diagnostic pop")
#endif
#else
#define LOCOST_ISA_REGIONS 0
#endif

// Keeps a vector in a register (no instruction): GCC otherwise folds a loaded vector into each
// instruction that uses it as a memory operand, loading it again every time ("v": x86's vector
// registers; "w": aarch64's).
#if defined(__x86_64__) || defined(__i386__)
#define LOCOST_KEEP_IN_REGISTER(x) asm("" : "+v"(x))
#elif defined(__aarch64__)
#define LOCOST_KEEP_IN_REGISTER(x) asm("" : "+w"(x))
#else
#define LOCOST_KEEP_IN_REGISTER(x) ((void)0)
#endif

// A cache-line prefetch for reading (locality 3: all levels, as _MM_HINT_T0; 2: as _MM_HINT_T1),
// on every architecture GCC and clang target.
#define LOCOST_PREFETCH_T0(p) __builtin_prefetch((p), 0, 3)
#define LOCOST_PREFETCH_T1(p) __builtin_prefetch((p), 0, 2)

namespace locost {

enum class isa_level : int { baseline, avx2, avx512, avx512_vnni, amx };

inline constexpr std::array<std::string_view, 5> isa_level_names = {"baseline", "avx2", "avx512", "avx512-vnni", "amx"};

inline std::string_view isa_level_name(isa_level l) { return isa_level_names[static_cast<std::size_t>(l)]; }

// What this CPU has, as the levels need it.
struct cpu_isa_features {
    bool avx2 = false;         // AVX, AVX2, FMA, F16C and the OS saving YMM state
    bool avx512 = false;       // F, CD, BW, DQ, VL and the OS saving ZMM state
    bool avx512_vnni = false;  // AVX512-VNNI
    bool avx512_bf16 = false;  // AVX512-BF16
    bool amx = false;          // AMX-TILE, -INT8, -BF16, the OS saving tile state, and this process allowed to use it
};

inline cpu_isa_features read_cpu_isa_features() {
    cpu_isa_features f;
#if LOCOST_ISA_REGIONS
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    const bool osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return f;
    unsigned xlo = 0, xhi = 0;
    __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));  // XCR0: the register state the OS saves
    const unsigned long long xcr0 = (static_cast<unsigned long long>(xhi) << 32) | xlo;
    const bool ymm = (xcr0 & 0x6) == 0x6, zmm = (xcr0 & 0xE6) == 0xE6, tiles = (xcr0 & 0x60000) == 0x60000;
    unsigned max_leaf = 0;
    __get_cpuid(0, &max_leaf, &b, &c, &d);
    if (max_leaf < 7) return f;
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned b7 = b, c7 = c, d7 = d;
    const unsigned a71 = [] {
        unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
        __cpuid_count(7, 1, a1, b1, c1, d1);
        return a1;
    }();
    auto bit = [](unsigned r, int i) { return ((r >> i) & 1u) != 0; };
    f.avx2 = ymm && fma && f16c && bit(b7, 5);
    f.avx512 = f.avx2 && zmm && bit(b7, 16) && bit(b7, 17) && bit(b7, 28) && bit(b7, 30) && bit(b7, 31);
    f.avx512_vnni = f.avx512 && bit(c7, 11);
    f.avx512_bf16 = f.avx512 && bit(a71, 5);
    bool amx = f.avx512_vnni && tiles && bit(d7, 22) && bit(d7, 24) && bit(d7, 25);
#if defined(__linux__) && defined(SYS_arch_prctl)
    // Linux hands out the tile data state only on request (ARCH_REQ_XCOMP_PERM, XTILEDATA = 18).
    if (amx) amx = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#endif
    f.amx = amx;
#endif
    return f;
}

inline isa_level level_of(const cpu_isa_features& f) {
    return f.amx        ? isa_level::amx
        : f.avx512_vnni ? isa_level::avx512_vnni
        : f.avx512      ? isa_level::avx512
        : f.avx2        ? isa_level::avx2
                        : isa_level::baseline;
}

// The level this translation unit's compiler flags already assume (-march): code outside the
// target regions uses it everywhere, so no lower level can run.
inline constexpr isa_level compiled_isa_level() {
#if defined(__AVX512F__) && defined(__AVX512CD__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__) &&            \
    defined(__AVX512VNNI__)
    return isa_level::avx512_vnni;
#elif defined(__AVX512F__) && defined(__AVX512CD__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
    return isa_level::avx512;
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
    return isa_level::avx2;
#else
    return isa_level::baseline;
#endif
}

namespace cpu_detail {

inline std::string isa_level_list() {
    std::string s;
    for (auto n : isa_level_names) s += (s.empty() ? "" : ", ") + std::string(n);
    return s;
}

// The kernels' level for a CPU of level `cpu`, a build compiled for `compiled` and LOCOST_ISA's
// value `requested` ("" = unset: the CPU's level). Pure, so tests can walk its cases. Throws
// isa.unknown_level, isa.above_cpu, isa.below_build or isa.build_above_cpu.
inline isa_level resolve_isa_level(isa_level cpu, isa_level compiled, std::string_view requested) {
    if (cpu < compiled)
        throw error("isa.build_above_cpu",
                    "this build was compiled for " + std::string(isa_level_name(compiled)) + " (-march) but this CPU has " +
                        std::string(isa_level_name(cpu)) + ": build with -DLOCOST_NATIVE=OFF for a portable build");
    if (requested.empty()) return cpu;
    for (std::size_t i = 0; i < isa_level_names.size(); ++i) {
        if (requested != isa_level_names[i]) continue;
        const auto want = static_cast<isa_level>(i);
        if (want > cpu)
            throw error("isa.above_cpu",
                        "LOCOST_ISA=" + std::string(requested) + ": this CPU has " + std::string(isa_level_name(cpu)) +
                            ", the highest level its kernels can use");
        if (want < compiled)
            throw error("isa.below_build",
                        "LOCOST_ISA=" + std::string(requested) + ": this build was compiled for " + std::string(isa_level_name(compiled)) +
                            " (-march=native); a portable build (-DLOCOST_NATIVE=OFF) can go lower");
        return want;
    }
    throw error("isa.unknown_level", "LOCOST_ISA=" + std::string(requested) + ": expected one of " + isa_level_list());
}

struct resolved_isa {
    cpu_isa_features cpu;
    isa_level level = isa_level::baseline;
    std::string problem, problem_id;  // LOCOST_ISA's error, raised by kernels_isa(); the kernels use the CPU's level meanwhile
};

inline const resolved_isa& resolve_isa() {
    static const resolved_isa r = [] {
        resolved_isa out;
        out.cpu = read_cpu_isa_features();
        const isa_level cpu = level_of(out.cpu);
        const char* env = std::getenv("LOCOST_ISA");
        try {
            out.level = resolve_isa_level(cpu, compiled_isa_level(), env ? env : "");
        } catch (const error& e) {
            out.problem = e.message();
            out.problem_id = e.id();
            out.level = std::max(cpu, compiled_isa_level());
        }
        return out;
    }();
    return r;
}

// Whether the kernels of level l may run (cheap: read before each kernel call).
inline bool isa_at_least(isa_level l) noexcept { return resolve_isa().level >= l; }

// The bfloat16 dot-product tiles: avx512-vnni's level and AVX512-BF16 on this CPU.
inline bool bf16_dot_products() noexcept { return isa_at_least(isa_level::avx512_vnni) && resolve_isa().cpu.avx512_bf16; }

}  // namespace cpu_detail

// The level the CPU kernels run at. Throws what resolve_isa_level() throws when LOCOST_ISA names
// no level or one this CPU or build cannot run (programs call this at start, so a typo is an
// error rather than a silent fallback).
inline isa_level kernels_isa() {
    const auto& r = cpu_detail::resolve_isa();
    if (!r.problem.empty()) throw error(r.problem_id, r.problem);
    return r.level;
}

// The CPU's own level (what LOCOST_ISA may go up to).
inline isa_level cpu_isa() { return level_of(cpu_detail::resolve_isa().cpu); }

}  // namespace locost
