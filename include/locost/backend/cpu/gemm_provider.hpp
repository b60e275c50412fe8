// Which library multiplies float32 matrices on this machine: chosen by what the CPU can do, not
// by what a library's table of CPU models knows.
//
// Why: OpenBLAS picks its kernel from the CPU model number, from a table fixed when it was
// released. Debian 12's OpenBLAS 0.3.21 meets a newer CPU with its SSE3 kernel ("Prescott"): on a
// 2-core Xeon (family 6, model 207) that was 29 GFLOP/s per core where its AVX-512 kernel gives
// 151. An environment can also force an older kernel (OPENBLAS_CORETYPE=Haswell on an AVX-512
// machine halves the rate). oneDNN's sgemm reads the CPU's feature bits instead and runs the
// widest ISA it finds, at OpenBLAS's best rate or above (bench/RESULTS.md, "Which GEMM").
//
// The rule (LOCOST_GEMM unset or "auto"): oneDNN when its kernels use the widest vector ISA this
// CPU has (on an AVX-512 machine it also encoded 5 % faster than OpenBLAS's own AVX-512 kernel);
// otherwise OpenBLAS when the kernel it picked does (a build without oneDNN); otherwise whichever
// of OpenBLAS, oneDNN and Eigen (whose ISA is the build's, -march) reaches the widest ISA.
// LOCOST_GEMM=openblas|onednn|eigen names one; a program calls set_float32_gemm().
// Double-precision products (the reference path) stay with OpenBLAS, else Eigen: oneDNN has no
// dgemm.
#pragma once
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../../config/error.hpp"

#ifdef LOCOST_USE_OPENBLAS
#include <cblas.h>
#endif
#ifdef LOCOST_USE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

namespace locost {

// Vector instruction sets, widest last. `unknown`: not an x86 CPU (nothing to compare).
enum class vector_isa { unknown, sse, avx, avx2, avx512 };

inline const char* isa_name(vector_isa i) {
    switch (i) {
    case vector_isa::sse: return "SSE";
    case vector_isa::avx: return "AVX";
    case vector_isa::avx2: return "AVX2";
    case vector_isa::avx512: return "AVX-512";
    default: return "unknown";
    }
}

// The widest vector ISA this CPU has (cpuid through GCC/Clang's __builtin_cpu_supports).
// AVX-512 counts only with BW and VL beside F, as oneDNN's and OpenBLAS's AVX-512 kernels need.
inline vector_isa machine_isa() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
        return vector_isa::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return vector_isa::avx2;
    if (__builtin_cpu_supports("avx")) return vector_isa::avx;
    return vector_isa::sse;
#else
    return vector_isa::unknown;
#endif
}

// The ISA of the kernel OpenBLAS names (openblas_get_corename(), any case). Names this table does
// not hold (a newer OpenBLAS's) count as SSE: not proven to use more.
inline vector_isa openblas_core_isa(std::string_view core) {
    std::string c(core);
    for (auto& ch : c) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    for (const char* n : {"skylakex", "cooperlake", "sapphirerapids"})
        if (c == n) return vector_isa::avx512;
    for (const char* n : {"haswell", "zen"})
        if (c == n) return vector_isa::avx2;
    for (const char* n : {"sandybridge", "bulldozer", "piledriver", "steamroller", "excavator"})
        if (c == n) return vector_isa::avx;
    return vector_isa::sse;
}

enum class gemm_provider { openblas, onednn, eigen };

inline const char* provider_name(gemm_provider p) {
    switch (p) {
    case gemm_provider::openblas: return "openblas";
    case gemm_provider::onednn: return "onednn";
    default: return "eigen";
    }
}

// One library that can run float32 GEMM here, and the kernel it runs.
struct gemm_candidate {
    gemm_provider provider = gemm_provider::eigen;
    vector_isa isa = vector_isa::unknown;
    std::string kernel;  // what the library says it picked, e.g. "Cooperlake", "avx512_core_bf16"
};

struct gemm_choice {
    gemm_provider provider = gemm_provider::eigen;
    vector_isa isa = vector_isa::unknown;
    std::string kernel;
    std::string reason;  // one sentence: why this one

    // "oneDNN sgemm (avx512_core_bf16, AVX-512)": the tool's closing line and inspect --system.
    std::string describe() const {
        const char* lib = provider == gemm_provider::openblas ? "OpenBLAS sgemm"
            : provider == gemm_provider::onednn               ? "oneDNN sgemm"
                                                              : "Eigen";
        return std::string(lib) + " (" + kernel + ", " + isa_name(isa) + ")";
    }
};

// The rule above, on the candidates this build and machine have (at most one per provider; Eigen
// always). `requested`: LOCOST_GEMM's value ("" = auto). Pure, so tests can walk its cases.
inline gemm_choice choose_gemm(vector_isa machine, const std::vector<gemm_candidate>& candidates, std::string_view requested) {
    auto from = [](const gemm_candidate& c, std::string reason) { return gemm_choice{c.provider, c.isa, c.kernel, std::move(reason)}; };
    auto find = [&](gemm_provider p) -> const gemm_candidate* {
        for (const auto& c : candidates)
            if (c.provider == p) return &c;
        return nullptr;
    };
    if (!requested.empty() && requested != "auto") {
        for (gemm_provider p : {gemm_provider::openblas, gemm_provider::onednn, gemm_provider::eigen})
            if (requested == provider_name(p)) {
                if (const auto* c = find(p)) return from(*c, "LOCOST_GEMM=" + std::string(requested));
                throw error("gemm.provider_unavailable",
                            "LOCOST_GEMM=" + std::string(requested) + ": this build has no " + provider_name(p) +
                                " (configure with -DLOCOST_USE_" + (p == gemm_provider::openblas ? "OPENBLAS" : "ONEDNN") + "=ON)");
            }
        throw error("gemm.unknown_provider", "LOCOST_GEMM=" + std::string(requested) + ": expected auto, openblas, onednn or eigen");
    }
    const auto* blas = find(gemm_provider::openblas);
    const auto* dnnl = find(gemm_provider::onednn);
    if (machine == vector_isa::unknown) {  // not x86: no ISA to compare; the libraries pick their own kernels
        const auto* first = dnnl ? dnnl : blas ? blas : find(gemm_provider::eigen);
        if (!first) throw error("gemm.provider_unavailable", "no float32 GEMM provider");
        return from(*first,
                    std::string("not an x86 CPU: ") +
                        (dnnl       ? "oneDNN"
                             : blas ? "OpenBLAS"
                                    : "Eigen") +
                        " first, its kernels chosen from this CPU's features");
    }
    const std::string widest = isa_name(machine);
    if (dnnl && dnnl->isa >= machine) return from(*dnnl, "oneDNN's kernels (" + dnnl->kernel + ") use this CPU's widest ISA, " + widest);
    const std::string no_dnnl = dnnl ? "oneDNN reaches " + std::string(isa_name(dnnl->isa)) + " only" : "no oneDNN in this build";
    if (blas && blas->isa >= machine)
        return from(*blas, no_dnnl + "; OpenBLAS's kernel " + blas->kernel + " uses this CPU's widest ISA, " + widest);
    const std::string no_blas =
        blas ? "OpenBLAS's kernel " + blas->kernel + " uses " + isa_name(blas->isa) + ", not this CPU's " + widest : "no OpenBLAS";
    const gemm_candidate* best = nullptr;
    for (const auto& c : candidates)
        if (!best || c.isa > best->isa) best = &c;
    if (!best) throw error("gemm.provider_unavailable", "no float32 GEMM provider");  // Eigen is always a candidate
    return from(*best, no_dnnl + "; " + no_blas + "; so the widest available");
}

// The candidates of this build on this machine.
inline std::vector<gemm_candidate> gemm_candidates() {
    std::vector<gemm_candidate> out;
#ifdef LOCOST_USE_OPENBLAS
    {
        const char* core = openblas_get_corename();
        const std::string name = core ? core : "unknown";
        out.push_back({gemm_provider::openblas, openblas_core_isa(name), name});
    }
#endif
#ifdef LOCOST_USE_ONEDNN
    {
        const auto isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
#if defined(__x86_64__) || defined(__i386__)
        // dnnl_cpu_isa_t is a bit set: avx2 = 0x7, avx512_core = 0x27 and up.
        const vector_isa v = (isa & 0x20u) ? vector_isa::avx512
            : (isa & 0x4u)                 ? vector_isa::avx2
            : (isa & 0x2u)                 ? vector_isa::avx
                                           : vector_isa::sse;
        std::string name;
        switch (isa) {
        case 0x1: name = "sse41"; break;
        case 0x3: name = "avx"; break;
        case 0x7: name = "avx2"; break;
        case 0x407: name = "avx2_vnni"; break;
        case 0x27: name = "avx512_core"; break;
        case 0x67: name = "avx512_core_vnni"; break;
        case 0xe7: name = "avx512_core_bf16"; break;
        case 0x3e7: name = "avx512_core_amx"; break;
        default: {
            char b[24];
            std::snprintf(b, sizeof b, "isa 0x%x", isa);
            name = b;
        }
        }
#else
        // (dnnl_cpu_isa_t names x86 sets; elsewhere the value is oneDNN's own, e.g. SVE widths on
        // aarch64, and not an x86 ISA: kept as a number)
        const vector_isa v = vector_isa::unknown;
        char b[24];
        std::snprintf(b, sizeof b, "isa 0x%x", isa);
        const std::string name = b;
#endif
        out.push_back({gemm_provider::onednn, v, name});
    }
#endif
    // Eigen's kernels are compiled for the build's ISA (-march).
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
    out.push_back({gemm_provider::eigen, vector_isa::avx512, "compiled for AVX-512"});
#elif defined(__AVX2__) && defined(__FMA__)
    out.push_back({gemm_provider::eigen, vector_isa::avx2, "compiled for AVX2"});
#elif defined(__AVX__)
    out.push_back({gemm_provider::eigen, vector_isa::avx, "compiled for AVX"});
#elif defined(__SSE2__)
    out.push_back({gemm_provider::eigen, vector_isa::sse, "compiled for SSE2"});
#else
    out.push_back({gemm_provider::eigen, vector_isa::unknown, "compiled for this target"});
#endif
    return out;
}

namespace cpu_detail {

struct resolved_gemm {
    gemm_choice choice;
    std::string problem;  // LOCOST_GEMM's error, raised by float32_gemm(); the kernels use auto meanwhile
    std::string problem_id;
};

inline const resolved_gemm& resolve_gemm() {
    static const resolved_gemm r = [] {
        resolved_gemm out;
        const auto candidates = gemm_candidates();
        const char* env = std::getenv("LOCOST_GEMM");
        try {
            out.choice = choose_gemm(machine_isa(), candidates, env ? env : "");
        } catch (const error& e) {
            out.problem = e.message();
            out.problem_id = e.id();
            out.choice = choose_gemm(machine_isa(), candidates, "");
        }
        return out;
    }();
    return r;
}

// -1: none; else a gemm_provider set by set_float32_gemm().
inline std::atomic<int>& gemm_override() {
    static std::atomic<int> o{-1};
    return o;
}

// The provider the float32 kernels call now (cheap: read on every product).
inline gemm_provider active_float32_gemm() noexcept {
    const int o = gemm_override().load(std::memory_order_relaxed);
    return o >= 0 ? static_cast<gemm_provider>(o) : resolve_gemm().choice.provider;
}

}  // namespace cpu_detail

// What float32 GEMMs run on: the provider, its kernel and why. Throws gemm.unknown_provider or
// gemm.provider_unavailable when LOCOST_GEMM names no provider of this build (the tool calls this
// at start, so a typo is an error rather than a silent fallback).
inline gemm_choice float32_gemm() {
    const auto& r = cpu_detail::resolve_gemm();
    if (!r.problem.empty()) throw error(r.problem_id, r.problem);
    const int o = cpu_detail::gemm_override().load();
    if (o < 0) return r.choice;
    for (const auto& c : gemm_candidates())
        if (static_cast<int>(c.provider) == o) return gemm_choice{c.provider, c.isa, c.kernel, "set_float32_gemm()"};
    return r.choice;
}

// Runs float32 GEMMs on provider p from now on (all threads); std::nullopt returns to the rule.
// Throws gemm.provider_unavailable when this build lacks p. Not to be called while products run.
inline void set_float32_gemm(std::optional<gemm_provider> p) {
    if (!p) {
        cpu_detail::gemm_override().store(-1);
        return;
    }
    for (const auto& c : gemm_candidates())
        if (c.provider == *p) {
            cpu_detail::gemm_override().store(static_cast<int>(*p));
            return;
        }
    throw error("gemm.provider_unavailable", std::string("set_float32_gemm: this build has no ") + provider_name(*p));
}

}  // namespace locost
