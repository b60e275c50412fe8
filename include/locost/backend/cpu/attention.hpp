// Attention on the CPU (ops::attention): problems split over OpenMP threads (one head of one
// sequence each). Keys/values are processed in blocks of 256 rows, widened to the scalar type in a
// per-thread buffer (no copy for float32 storage of the same type), so a long int8 or bfloat16
// cache is read once per query batch and never expanded in memory. For up to 4 query rows
// (decoding steps) over any cache, fused prefetching kernels read each row once (bfloat16, int8
// widened in registers) instead. Scores for all keys are kept (nq × nk per thread): exact softmax;
// over more than online_block keys, or over an int8 cache with int8 products (--compute int8,
// cache_tiles_i8.hpp), those few rows go by blocks of keys with an online softmax.
//
// One file per strategy (attention_few_rows.hpp, attention_online.hpp, attention_bf16.hpp; the
// generic path here): the table above kernel<attention_op, cpu> says which runs when.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <type_traits>
#include <vector>
#include <xsimd/xsimd.hpp>

#include "../../core/aligned.hpp"
#include "../../ops/attention.hpp"
#include "../../ops/gemm.hpp"
#include "attention_bf16.hpp"
#include "attention_few_rows.hpp"
#include "attention_online.hpp"
#include "attention_rows.hpp"
#include "cache_tiles_i8.hpp"
#include "linear.hpp"
#include "threads.hpp"

namespace locost {

namespace cpu_detail {

// row = softmax(row + bias) over n entries, vectorised: over a long document's keys the
// exponentials are most of a decoding step's arithmetic (base model, 16K tokens: 2.4 M per
// hypothesis and step). A row whose entries are all −inf becomes zeros.
template <class Scalar>
void softmax_row(Scalar* row, const Scalar* bias, index_t n) {
    using V = xsimd::batch<Scalar>;
    constexpr index_t w = static_cast<index_t>(V::size);
    const index_t nv = n / w * w;
    constexpr Scalar neg_inf = -std::numeric_limits<Scalar>::infinity();
    V vm(neg_inf);
    Scalar m = neg_inf;
    for (index_t j = 0; j < nv; j += w) {
        V x = V::load_unaligned(row + j);
        if (bias) {
            x += V::load_unaligned(bias + j);
            x.store_unaligned(row + j);
        }
        vm = xsimd::max(vm, x);
    }
    for (index_t j = nv; j < n; ++j) {
        if (bias) row[j] += bias[j];
        m = std::max(m, row[j]);
    }
    alignas(64) Scalar lanes[w];
    vm.store_aligned(lanes);
    for (index_t l = 0; l < w; ++l) m = std::max(m, lanes[l]);
    if (m == neg_inf) {
        std::fill_n(row, n, Scalar(0));
        return;
    }
    const Scalar sum = exp_row(row, m, n);
    const V inv(Scalar(1) / sum);
    for (index_t j = 0; j < nv; j += w) (V::load_unaligned(row + j) * inv).store_unaligned(row + j);
    for (index_t j = nv; j < n; ++j) row[j] *= Scalar(1) / sum;
}

// Which path kernel<attention_op, cpu> takes for a problem (head width d): attention_path_of()
// answers, solve() branches on its answer, run() groups the bf16 path's problems by it, and tests
// name it. The conditions in the order they are tested; the first that holds is taken:
//
//   path      condition                                                         file
//   online    float; no second segment, nk > online_block (1024) and            attention_online.hpp
//             fusable(nq, d); or cache_i8::accepts(p, d): int8 products over
//             int8 keys and values with scales, 1–4 query rows, d a multiple
//             of 64, no second segment (builds with AVX512-VNNI and -BW only)
//   bf16      float; bf16_attention_accepts(p): products other than exact,      attention_bf16.hpp
//             nq ≥ bf16_attention_min_rows (16), nk > 0, no second segment,
//             keys and values read in place (native, or float32); builds with
//             LOCOST_USE_ONEDNN only. Where oneDNN has no bfloat16 matmul,
//             bf16_attention() returns false and the problem is solved as
//             generic (16 or more query rows: never fusable)
//   few_rows  float; fusable(nq, d): 1 ≤ nq ≤ 4, d = 2, 4 or 8 vectors of       attention_few_rows.hpp
//             flanes floats, (d / flanes)·nq ≤ 16. All scores kept
//             (softmax_row); every product of both segments by the fused
//             kernels
//   generic   anything else, and every double problem. All scores kept;         attention.hpp
//             products by GEMM over the stored rows (read_in_place) or over
//             blocks of `block` rows widened to the scalar type
//
// Tasks (run()): the bf16 path's problems over the same keys and values make one task, which
// rounds them once; every other problem is a task of its own.
enum class attention_path { online, bf16, few_rows, generic };

// The path's name in the table above (for tests and benchmarks, as cuda_detail::attention_plan).
inline constexpr const char* attention_path_name(attention_path a) noexcept {
    switch (a) {
    case attention_path::online: return "online";
    case attention_path::bf16: return "bf16";
    case attention_path::few_rows: return "few_rows";
    case attention_path::generic: return "generic";
    }
    return "?";
}

// The path of the table above that kernel<attention_op, cpu>::solve() takes for p (bf16: chosen,
// whether or not oneDNN then has the bfloat16 matmul). fusable() looks at nq and d only (any
// precision), so one answer holds for every product of a problem: both segments' scores and
// values.
template <class Scalar>
attention_path attention_path_of(const ops::attention_problem<Scalar>& p, index_t d) {
    if constexpr (std::is_same_v<Scalar, float>) {
        const bool long_fused = p.nk2 == 0 && p.nk > online_block && fusable(p.k, p.nq, d) && fusable(p.v, p.nq, d);
        if (long_fused || cache_i8::accepts(p, d)) return attention_path::online;
        if (bf16_attention_accepts(p)) return attention_path::bf16;
        if (fusable(p.k, p.nq, d)) return attention_path::few_rows;
    } else {
        (void)p;
        (void)d;
    }
    return attention_path::generic;
}

}  // namespace cpu_detail

template <class Scalar>
struct kernel<ops::attention_op, cpu, Scalar> {
    static constexpr index_t block = 256;  // rows of reduced-precision keys/values widened at a time
    struct scratch {
        std::vector<Scalar> scores;
        aligned_ptr<Scalar> rows = aligned_alloc_n<Scalar>(static_cast<std::size_t>(block * 512));
        index_t rows_cap = block * 512;
    };

    static void run(const std::vector<ops::attention_problem<Scalar>>& problems, index_t d) {
        std::vector<scratch> per_thread(static_cast<std::size_t>(num_threads()));
        // Tasks: a problem each, except that the bfloat16 path's problems over the same keys and
        // values (one head's query blocks) make one task, which rounds them once.
        std::vector<std::size_t> order(problems.size());
        std::vector<std::size_t> task_begin;
        for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
        if constexpr (std::is_same_v<Scalar, float>) {
            std::vector<char> shared(problems.size(), 0);
            for (std::size_t i = 0; i < problems.size(); ++i)
                shared[i] = cpu_detail::attention_path_of(problems[i], d) == cpu_detail::attention_path::bf16;
            auto key = [&](std::size_t i) {
                const auto& p = problems[i];
                return std::make_tuple(!shared[i], p.k.data, p.v.data, p.k.ld, p.v.ld, p.nk);
            };
            std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
                return shared[a] && shared[b] ? key(a) < key(b) : shared[a] > shared[b];
            });
            for (std::size_t n = 0; n < order.size(); ++n)
                if (n == 0 || !shared[order[n]] || key(order[n]) != key(order[n - 1])) task_begin.push_back(n);
        } else {
            for (std::size_t n = 0; n < order.size(); ++n) task_begin.push_back(n);
        }
        task_begin.push_back(order.size());
        cpu_detail::parallel_for_dynamic(static_cast<index_t>(task_begin.size()) - 1, [&](index_t task, int t) {
            const auto first = task_begin[static_cast<std::size_t>(task)], last = task_begin[static_cast<std::size_t>(task) + 1];
            for (std::size_t n = first; n < last; ++n) solve(problems[order[n]], d, per_thread[static_cast<std::size_t>(t)], n > first);
        });
    }

    // kv_rounded: the previous problem this thread solved had the same keys and values (a task's).
    static void solve(const ops::attention_problem<Scalar>& p, index_t d, scratch& s, [[maybe_unused]] bool kv_rounded) {
        if (block * d > s.rows_cap) {
            s.rows = aligned_alloc_n<Scalar>(static_cast<std::size_t>(block * d));
            s.rows_cap = block * d;
        }
        const cpu_detail::attention_path path = cpu_detail::attention_path_of(p, d);
        if constexpr (std::is_same_v<Scalar, float>) {
            if (path == cpu_detail::attention_path::online) {
                cpu_detail::online_fused(p, d, s.scores);
                return;
            }
#ifdef LOCOST_USE_ONEDNN
            if (path == cpu_detail::attention_path::bf16 && cpu_detail::bf16_attention(p, d, kv_rounded)) return;
#endif
        }
        // few_rows, generic, and bf16 where bf16_attention() declined: all scores kept
        [[maybe_unused]] const bool fused = path == cpu_detail::attention_path::few_rows;
        const index_t n_all = p.nk + p.nk2;  // scores of both segments side by side
        s.scores.resize(static_cast<std::size_t>(p.nq * n_all));
        Scalar* S = s.scores.data();
        // S = Q·[K | K2]ᵀ
        for (int seg = 0; seg < 2; ++seg) {
            const index_t nk = seg == 0 ? p.nk : p.nk2, off = seg == 0 ? 0 : p.nk;
            const ops::kv_matrix& km = seg == 0 ? p.k : p.k2;
            if constexpr (std::is_same_v<Scalar, float>) {
                if (nk > 0 && fused) {
                    cpu_detail::fused_dispatch<true>(km, p.nq, d, nk, p.q, p.ldq, S + off, n_all);
                    continue;
                }
            }
            const index_t step = cpu_detail::read_in_place<Scalar>(km) ? std::max<index_t>(nk, 1) : block;
            for (index_t j0 = 0; j0 < nk; j0 += step) {
                const index_t n = std::min(step, nk - j0);
                index_t ldk = 0;
                const Scalar* K = cpu_detail::kv_rows(km, j0, n, d, s.rows.get(), ldk);
                ops::gemm<cpu, Scalar>({false, true, p.nq, n, d, p.ldq, ldk, n_all}, Scalar(1), p.q, K, Scalar(0), S + off + j0);
            }
        }
        // + biases, softmax per query row
        const bool single_bias = !p.bias2 && !p.key_bias && p.nk2 == 0;
        for (index_t i = 0; i < p.nq; ++i) {
            Scalar* row = S + i * n_all;
            if (single_bias) {
                cpu_detail::softmax_row(row, p.bias ? cpu_detail::bias_row(p.bias, p.ldb, p.nk, i) : nullptr, p.nk);
                continue;
            }
            if (p.bias) cpu_detail::add_row(row, cpu_detail::bias_row(p.bias, p.ldb, p.nk, i), p.nk);
            if (p.key_bias) cpu_detail::add_row(row, p.key_bias, p.nk);
            if (p.bias2) cpu_detail::add_row(row + p.nk, cpu_detail::bias_row(p.bias2, p.ldb2, p.nk2, i), p.nk2);
            cpu_detail::softmax_row(row, static_cast<const Scalar*>(nullptr), n_all);
        }
        // O = S·[V | V2]
        for (index_t i = 0; i < p.nq; ++i) std::fill_n(p.out + i * p.ldo, d, Scalar(0));
        for (int seg = 0; seg < 2; ++seg) {
            const index_t nk = seg == 0 ? p.nk : p.nk2, off = seg == 0 ? 0 : p.nk;
            const ops::kv_matrix& vm = seg == 0 ? p.v : p.v2;
            if constexpr (std::is_same_v<Scalar, float>) {
                if (nk > 0 && fused) {
                    cpu_detail::fused_dispatch<false>(vm, p.nq, d, nk, S + off, n_all, p.out, p.ldo);
                    continue;
                }
            }
            const index_t step = cpu_detail::read_in_place<Scalar>(vm) ? std::max<index_t>(nk, 1) : block;
            for (index_t j0 = 0; j0 < nk; j0 += step) {
                const index_t n = std::min(step, nk - j0);
                index_t ldv = 0;
                const Scalar* V = cpu_detail::kv_rows(vm, j0, n, d, s.rows.get(), ldv);
                ops::gemm<cpu, Scalar>({false, false, p.nq, d, n, n_all, ldv, p.ldo}, Scalar(1), S + off + j0, V, Scalar(1), p.out);
            }
        }
    }
};

}  // namespace locost
