// Shared-kv attention on the CPU (ops::shared_kv_attention: many queries over one long matrix
// that is both keys and values, as folded cross-attention asks). Keys split over the threads,
// each walking its range in blocks of 128 rows with an online softmax (running max m, sum l, and
// the unnormalised output acc per query):
//
//     s = q·Kbᵀ;  m' = max(m, max s);  acc = acc·e^(m − m') + e^(s − m')·Kb;  l = l·e^(m − m') + Σ e^(s − m')
//
// then out = Σ_t e^(m_t − M) acc_t / Σ_t e^(m_t − M) l_t over the threads (M = max_t m_t). A block
// stays in cache for both products, so the matrix is read once per call: for the base model's 12
// heads of one greedy row at 697K tokens, 1.07 GB of bfloat16 states per layer. Float computation
// with d a multiple of the vector width runs register tiles on the stored rows (fold_tiles.hpp;
// the bfloat16-product tiles of fold_tiles_bf16.hpp for products = bf16 or i8 over bfloat16 states,
// and the int8-product tiles of fold_tiles_i8.hpp for products = i8 over int8 states, where the
// ISA has them); other cases widen each block to the scalar type and multiply by GEMM.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "../../core/aligned.hpp"
#include "../../ops/attention.hpp"
#include "../../ops/gemm.hpp"
#include "attention_rows.hpp"
#include "fold_tiles.hpp"
#include "fold_tiles_bf16.hpp"
#include "fold_tiles_i8.hpp"
#include "threads.hpp"

namespace locost {

template <class Scalar>
struct kernel<ops::shared_kv_attention_op, cpu, Scalar> {
    static void run(const Scalar* q, index_t nq, index_t ldq, const ops::kv_matrix& S, index_t nk, index_t d, Scalar* out, index_t ldo,
                    ops::attention_products products) {
        constexpr index_t block = 128;
        constexpr Scalar neg_inf = -std::numeric_limits<Scalar>::infinity();
        const index_t parts = std::max<index_t>(1, std::min<index_t>(num_threads(), (nk + block - 1) / block));
        struct partial {
            std::vector<Scalar> m, l, acc;
        };
        std::vector<partial> part(static_cast<std::size_t>(parts));
        bool tiles = false;
        if constexpr (std::is_same_v<Scalar, float>) tiles = d % cpu_detail::level_flanes() == 0;
        const cpu_detail::fold_bf16 bf16(q, nq, ldq, S, d, products);
        const cpu_detail::fold_i8 i8(q, nq, ldq, S, d, products);
        cpu_detail::parallel_for_dynamic(parts, [&](index_t t, int) {
            const cpu_detail::flush_denormals ftz;
            partial& pt = part[static_cast<std::size_t>(t)];
            pt.m.assign(static_cast<std::size_t>(nq), neg_inf);
            pt.l.assign(static_cast<std::size_t>(nq), Scalar(0));
            pt.acc.assign(static_cast<std::size_t>(nq * d), Scalar(0));
            const index_t j_begin = nk * t / parts, j_end = nk * (t + 1) / parts;
            std::vector<Scalar> P(static_cast<std::size_t>(nq * block)), rescale(static_cast<std::size_t>(nq));
            // Online softmax over a block's scores P (nq × n): P becomes e^(s − m'), and rescale_i
            // the factor e^(m − m') the running sums still need.
            auto softmax_step = [&](index_t n) {
                for (index_t i = 0; i < nq; ++i) {
                    Scalar* p = P.data() + i * n;
                    const Scalar m_new = std::max(pt.m[i], cpu_detail::max_row(p, n));
                    rescale[static_cast<std::size_t>(i)] = Scalar(1);
                    if (m_new == neg_inf) {  // nothing finite yet: the block adds nothing
                        std::fill_n(p, n, Scalar(0));
                        continue;
                    }
                    if (m_new != pt.m[i]) {
                        const Scalar scale = pt.m[i] == neg_inf ? Scalar(0) : std::exp(pt.m[i] - m_new);
                        pt.l[i] *= scale;
                        rescale[static_cast<std::size_t>(i)] = scale;
                        pt.m[i] = m_new;
                    }
                    pt.l[i] += cpu_detail::exp_row(p, m_new, n);
                }
            };
            if constexpr (std::is_same_v<Scalar, float>) {
                if (i8.takes()) {
                    auto scratch = i8.make_scratch(block);
                    std::vector<float> accp(static_cast<std::size_t>(nq * i8.width()), 0.0f);  // columns permuted
                    for (index_t j0 = j_begin; j0 < j_end; j0 += block) {
                        const index_t n = std::min(block, j_end - j0);
                        i8.scores(j0, n, P.data(), scratch);
                        softmax_step(n);
                        i8.values(j0, n, P.data(), rescale.data(), accp.data(), scratch);
                    }
                    i8.finish(accp.data(), pt.acc.data());
                    return;
                }
                if (bf16.takes()) {
                    std::vector<std::uint32_t> pairs(static_cast<std::size_t>(nq * (block / 2)));  // P as bfloat16 pairs
                    for (index_t j0 = j_begin; j0 < j_end; j0 += block) {
                        const index_t n = std::min(block, j_end - j0);
                        bf16.scores(j0, n, P.data());
                        softmax_step(n);
                        bf16.values(j0, n, P.data(), pairs.data(), rescale.data(), pt.acc.data());
                    }
                    return;
                }
                if (tiles) {
                    auto walk = [&]<class Stored>(const Stored* base) {
                        for (index_t j0 = j_begin; j0 < j_end; j0 += block) {
                            const index_t n = std::min(block, j_end - j0);
                            const Stored* K = base + j0 * S.ld;
                            const float* sc = S.scale ? S.scale + j0 : nullptr;
                            cpu_detail::fold_scores(q, nq, ldq, K, S.ld, sc, n, d, P.data(), n);
                            softmax_step(n);
                            if (sc)  // int8: each row's scale multiplies its probability
                                for (index_t i = 0; i < nq; ++i)
                                    for (index_t j = 0; j < n; ++j) P[static_cast<std::size_t>(i * n + j)] *= sc[j];
                            cpu_detail::fold_values(P.data(), nq, n, n, K, S.ld, rescale.data(), d, pt.acc.data(), d);
                        }
                    };
                    if (S.precision == ops::kv_precision::bf16) walk(static_cast<const std::uint16_t*>(S.data));
                    else if (S.precision == ops::kv_precision::i8) walk(static_cast<const std::int8_t*>(S.data));
                    else walk(static_cast<const float*>(S.data));  // f32, or native float
                    return;
                }
            }
            const aligned_ptr<Scalar> rows = aligned_alloc_n<Scalar>(static_cast<std::size_t>(block * d));
            for (index_t j0 = j_begin; j0 < j_end; j0 += block) {
                const index_t n = std::min(block, j_end - j0);
                index_t ld = 0;
                const Scalar* K = cpu_detail::kv_rows(S, j0, n, d, rows.get(), ld);
                ops::gemm<cpu, Scalar>({false, true, nq, n, d, ldq, ld, n}, Scalar(1), q, K, Scalar(0), P.data());
                softmax_step(n);
                for (index_t i = 0; i < nq; ++i)
                    if (rescale[static_cast<std::size_t>(i)] != Scalar(1))
                        for (index_t c = 0; c < d; ++c) pt.acc[static_cast<std::size_t>(i * d + c)] *= rescale[static_cast<std::size_t>(i)];
                ops::gemm<cpu, Scalar>({false, false, nq, d, n, n, ld, d}, Scalar(1), P.data(), K, Scalar(1), pt.acc.data());
            }
        });
        for (index_t i = 0; i < nq; ++i) {
            Scalar M = neg_inf;
            for (const auto& pt : part) M = std::max(M, pt.m[i]);
            Scalar* o = out + i * ldo;
            std::fill_n(o, d, Scalar(0));
            if (M == neg_inf) continue;  // every key masked: zeros, as attention() gives
            Scalar l = 0;
            for (const auto& pt : part) {
                if (pt.m[i] == neg_inf) continue;
                const Scalar w = std::exp(pt.m[i] - M);
                l += w * pt.l[i];
                for (index_t c = 0; c < d; ++c) o[c] += w * pt.acc[i * d + c];
            }
            for (index_t c = 0; c < d; ++c) o[c] /= l;
        }
    }
};

}  // namespace locost
