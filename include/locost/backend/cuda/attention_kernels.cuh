// The two kernels of GPU attention (attention.cu says which call runs what):
//
//   attend_chunks   softmax(q·Kᵀ + bias)·V of NQ query rows over one chunk of keys, online:
//                       m' = max(m, max_u s_u),  l' = l·e^(m − m') + Σ_u e^(s_u − m'),
//                       o' = o·e^(m − m') + Σ_u e^(s_u − m')·v_u
//                   out = o / l when the row's keys fit one chunk, else the partial (m, l, o)
//   merge_chunks    a row's partials combined in chunk order:
//                       M = max_c m_c,  out = Σ_c e^(m_c − M)·o_c / Σ_c e^(m_c − M)·l_c
//
// Layout of a warp. A key row of width d ≤ LK·8·NB is read by a group of LK lanes, each holding
// runs of 8 consecutive columns (NB runs of the row's LK·8-column blocks), so a warp reads
// KW = 32/LK rows at once, one per group, each group walking its own keys with its own softmax
// state, and the groups' states are combined once at the chunk's end. Narrow rows take few lanes
// (a 64-wide head: 8 lanes, 4 keys at once, one 8-byte load per int8 row and lane), so a score
// costs log2(LK) shuffles instead of 5 and the loads are whole vectors; d_model-wide rows (folded
// cross-attention) take the whole warp. The NQ query rows of a work item share every key and value
// row loaded (beam hypotheses over one document, heads over shared states); each key's U rows per
// group are loaded before any is used, so memory latency overlaps.
//
// int8 rows are widened to T without their scale, which multiplies the score (keys) or the
// probability (values) instead: the same value as the CPU's widening up to rounding.
#pragma once
#include <cstdint>

#include "runtime.cuh"

namespace locost::cuda_detail::attention_kernels {

inline constexpr int warps_per_block = 4;
inline constexpr int threads = warps_per_block * 32;
inline constexpr int merge_threads = 256;
// Columns a lane holds per block of a row.
inline constexpr int run = 8;
// Widest rows: attention heads are 64 wide, folded cross-attention's states d_model (at most 1024
// in the supported models).
inline constexpr index_t max_width = 1024;
// Chunks per query row at the most: the merge keeps one weight per chunk in shared memory.
inline constexpr index_t max_chunks = 4096;
// Problems whose descriptors travel in the launch's own parameters (no copy to the device and no
// wait for one): a decoding step's calls have one per head and row.
inline constexpr int inline_tasks = 16;

// A problem as the kernels read it: the op's fields with dense bias strides resolved to nk resp.
// nk2, where its work items, partial records and merge rows start, and how its rows are read.
template <class T>
struct task {
    ops::attention_problem<T> p;
    index_t row_groups = 1;     // groups of NQ query rows
    index_t chunks = 1;         // key chunks per query row
    index_t item_begin = 0;     // item = item_begin + chunk·row_groups + group
    index_t partial_begin = 0;  // chunks > 1: record = partial_begin + chunk·nq + row
    index_t merge_begin = 0;    // chunks > 1: merge row = merge_begin + row
    int vector_loads = 0;       // every row of every segment is read in aligned 8-column vectors
    int same = 0;               // keys and values are one matrix (shared_kv_attention)
};

// The problems of one launch: in the launch's parameters (count ≤ inline_tasks), or in device
// memory.
template <class T>
struct task_list {
    const task<T>* device = nullptr;
    index_t count = 0;
    task<T> local[inline_tasks];
    __device__ const task<T>* begin() const { return device ? device : local; }
};

// The task that owns work item (Merge: merge row) w: the last whose begin is ≤ w. A task with no
// merge rows starts where the next one does and loses that tie, so the one found holds w.
template <bool Merge, class T>
__device__ inline const task<T>& task_of(const task<T>* tasks, index_t n, index_t w) {
    index_t lo = 0, hi = n - 1;
    while (lo < hi) {
        const index_t mid = (lo + hi + 1) / 2;
        const index_t begin = Merge ? tasks[mid].merge_begin : tasks[mid].item_begin;
        if (begin <= w) lo = mid;
        else hi = mid - 1;
    }
    return tasks[lo];
}

// ---- reading stored rows ----------------------------------------------------------------

inline std::size_t element_bytes(ops::kv_precision p, std::size_t native) {
    return p == ops::kv_precision::native ? native : p == ops::kv_precision::f32 ? 4 : p == ops::kv_precision::bf16 ? 2 : 1;
}

template <int Words>
__device__ inline void load_words(const void* p, unsigned (&w)[Words]) {
    if constexpr (Words == 2) {
        const uint2 a = load_vector<uint2>(p);
        w[0] = a.x, w[1] = a.y;
    } else {
#pragma unroll
        for (int k = 0; k < Words / 4; ++k) {
            const uint4 a = load_vector<uint4>(static_cast<const unsigned char*>(p) + 16 * k);
            w[4 * k] = a.x, w[4 * k + 1] = a.y, w[4 * k + 2] = a.z, w[4 * k + 3] = a.w;
        }
    }
}

// Columns c0 … c0 + 7 of row j into r, widened exactly (int8 unscaled); columns ≥ d read as 0.
// vec: d is a multiple of 8 and the rows are aligned for vector loads (never for double rows of
// double), so a run that starts inside the row lies wholly inside it.
template <class T>
__device__ inline void load_run(const ops::kv_matrix& m, index_t j, index_t c0, index_t d, bool vec, T* r) {
    if (c0 >= d) {  // a lane past a narrow row (d = 32 on 8 lanes of 8 columns)
#pragma unroll
        for (int t = 0; t < run; ++t) r[t] = T(0);
        return;
    }
    switch (m.precision) {
    case ops::kv_precision::native:
        if constexpr (sizeof(T) == 4) {
            if (vec) {
                unsigned w[8];
                load_words<8>(static_cast<const T*>(m.data) + j * m.ld + c0, w);
#pragma unroll
                for (int t = 0; t < run; ++t) r[t] = __uint_as_float(w[t]);
                return;
            }
        }
        {
            const T* row = static_cast<const T*>(m.data) + j * m.ld;
#pragma unroll
            for (int t = 0; t < run; ++t) r[t] = c0 + t < d ? row[c0 + t] : T(0);
        }
        return;
    case ops::kv_precision::f32:
        if (vec) {
            unsigned w[8];
            load_words<8>(static_cast<const float*>(m.data) + j * m.ld + c0, w);
#pragma unroll
            for (int t = 0; t < run; ++t) r[t] = static_cast<T>(__uint_as_float(w[t]));
        } else {
            const float* row = static_cast<const float*>(m.data) + j * m.ld;
#pragma unroll
            for (int t = 0; t < run; ++t) r[t] = c0 + t < d ? static_cast<T>(row[c0 + t]) : T(0);
        }
        return;
    case ops::kv_precision::bf16:
        if (vec) {
            unsigned w[4];
            load_words<4>(static_cast<const std::uint16_t*>(m.data) + j * m.ld + c0, w);
#pragma unroll
            for (int t = 0; t < run; ++t) r[t] = static_cast<T>(__uint_as_float(t % 2 ? w[t / 2] & 0xffff0000u : w[t / 2] << 16));
        } else {
            const auto* row = static_cast<const std::uint16_t*>(m.data) + j * m.ld;
#pragma unroll
            for (int t = 0; t < run; ++t)
                r[t] = c0 + t < d ? static_cast<T>(__uint_as_float(static_cast<unsigned>(row[c0 + t]) << 16)) : T(0);
        }
        return;
    case ops::kv_precision::i8:
    default:  // (the CPU's kv_rows reads any other value as int8 too)
        if (vec) {
            unsigned w[2];
            load_words<2>(static_cast<const std::int8_t*>(m.data) + j * m.ld + c0, w);
#pragma unroll
            for (int t = 0; t < run; ++t) r[t] = static_cast<T>(static_cast<std::int8_t>(w[t / 4] >> (8 * (t % 4))));
        } else {
            const auto* row = static_cast<const std::int8_t*>(m.data) + j * m.ld;
#pragma unroll
            for (int t = 0; t < run; ++t) r[t] = c0 + t < d ? static_cast<T>(row[c0 + t]) : T(0);
        }
        return;
    }
}

// The storage a kernel is compiled for: any (the precision read per row, the generic path), or one
// fixed precision whose rows are read as vectors (every segment of the call in it, aligned: the
// decoding step's caches; native float rows are float32 rows).
enum storage : int { any_storage = 0, f32_rows = 1, bf16_rows = 2, i8_rows = 3 };

// exp in the scalar type: for float the hardware's exp2 of x·log2(e) (a relative error of a few
// 1e-7 where it matters, against summation errors of the same order), for double the exact one.
template <class T>
__device__ inline T softmax_exp(T x) {
    if constexpr (sizeof(T) == 4) return __expf(x);
    else return exp(x);
}

// Rows of a stored K/V matrix as a walk reads them: load(j, c0, r) puts columns c0 … c0 + 7 of
// row j in r (int8 unscaled), scale(j) is what multiplies row j's products (its int8 scale, or 1).
// The generic reader asks the matrix's precision at every row; a stored reader is compiled for one
// precision, keeps its base pointer and stride in registers and reads whole vectors.
template <class T>
struct any_rows {
    ops::kv_matrix m;
    index_t d;
    bool vec;
    __device__ void load(index_t j, index_t c0, T* r) const { load_run(m, j, c0, d, vec, r); }
    __device__ T scale(index_t j) const { return m.precision == ops::kv_precision::i8 ? static_cast<T>(m.scale[j]) : T(1); }
};

template <class T, int S>
struct stored_rows {
    static constexpr int bytes = S == f32_rows ? 4 : S == bf16_rows ? 2 : 1;  // per element
    const unsigned char* base;
    const float* scales;
    index_t stride;  // bytes per row
    index_t d;
    __device__ void load(index_t j, index_t c0, T* r) const {
        if (c0 >= d) {  // a lane past a narrow row
#pragma unroll
            for (int t = 0; t < run; ++t) r[t] = T(0);
            return;
        }
        const unsigned char* p = base + j * stride + c0 * bytes;
        if constexpr (S == f32_rows) {
            unsigned w[8];
            load_words<8>(p, w);
#pragma unroll
            for (int t = 0; t < run; ++t) r[t] = static_cast<T>(__uint_as_float(w[t]));
        } else if constexpr (S == bf16_rows) {
            unsigned w[4];
            load_words<4>(p, w);
#pragma unroll
            for (int t = 0; t < run; ++t) r[t] = static_cast<T>(__uint_as_float(t % 2 ? w[t / 2] & 0xffff0000u : w[t / 2] << 16));
        } else {
            // Each byte b as a float by its bits: b + 128 (the sign bit flipped) placed in the low
            // mantissa of 2^23 by a byte permute, minus 2^23 + 128 — exact, and two full-rate
            // instructions where a shift and an int-to-float conversion (a quarter-rate unit)
            // left the int8 cache compute-bound at a third of bfloat16's rate.
            unsigned w[2];
            load_words<2>(p, w);
#pragma unroll
            for (int t = 0; t < run; ++t)
                r[t] = static_cast<T>(__uint_as_float(__byte_perm(w[t / 4] ^ 0x80808080u, 0x4b000000u, 0x7650 + t % 4)) - 8388736.0f);
        }
    }
    __device__ T scale(index_t j) const {
        if constexpr (S == i8_rows) return static_cast<T>(scales[j]);
        else return T(1);
    }
};

template <class T, int S>
__device__ inline auto rows_of(const ops::kv_matrix& m, index_t d, bool vec) {
    if constexpr (S == any_storage) {
        return any_rows<T>{m, d, vec};
    } else {
        using R = stored_rows<T, S>;
        return R{static_cast<const unsigned char*>(m.data), m.scale, m.ld * R::bytes, d};
    }
}

// ---- the chunk kernel -------------------------------------------------------------------------

template <class T, int NQ, int LK, int NB>
struct shape {
    static constexpr int KW = 32 / LK;  // keys a warp reads at once
    static constexpr int C = NB * run;  // columns per lane
    // Key rows per group loaded ahead of use: fewer as the query rows' registers grow.
    static constexpr int U = NB == 1 ? (NQ == 1 ? 4 : 2) : (NQ == 1 ? 2 : 1);
};

template <class T, int NQ, int C>
struct online_rows {
    T m[NQ], l[NQ], acc[NQ][C];
};

// Keys [b, e) of one segment for the lane's group: score, bias terms in the CPU's order (q·k,
// then the bias row's entry, then the key bias), then the online update. Every lane loads U rows
// before any is used; a key past e loads row b instead (always there) and is masked, so the loads
// never branch. Same: the values are the keys (shared_kv_attention), and the row loaded for the
// score serves the update too.
template <class T, int NQ, int LK, int NB, bool Same, class Rows>
__device__ inline void walk(online_rows<T, NQ, NB * run>& st, const T (&q)[NQ][NB * run], const Rows& km, const Rows& vm, index_t b,
                            index_t e, const T* const (&bias)[NQ], const T* key_bias, int g, int group) {
    using S = shape<T, NQ, LK, NB>;
    constexpr int KW = S::KW, C = S::C, U = S::U;
    constexpr T neg_inf = -static_cast<T>(INFINITY);
    for (index_t base = b; base < e; base += KW * U) {
        T kr[U][C], vr[Same ? 1 : U][C], ks[U], vs[U];
        bool ok[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const index_t j = base + u * KW + group;
            ok[u] = j < e;
            const index_t jl = ok[u] ? j : b;
#pragma unroll
            for (int nb = 0; nb < NB; ++nb) km.load(jl, static_cast<index_t>((nb * LK + g) * run), &kr[u][nb * run]);
            ks[u] = vs[u] = km.scale(jl);
            if constexpr (!Same) {
#pragma unroll
                for (int nb = 0; nb < NB; ++nb) vm.load(jl, static_cast<index_t>((nb * LK + g) * run), &vr[u][nb * run]);
                vs[u] = vm.scale(jl);
            }
        }
        T s[NQ][U];
#pragma unroll
        for (int r = 0; r < NQ; ++r)
#pragma unroll
            for (int u = 0; u < U; ++u) {
                T a = 0;
#pragma unroll
                for (int t = 0; t < C; ++t) a += q[r][t] * kr[u][t];
                s[r][u] = a;
            }
            // The group's lanes are LK neighbours: xor with offsets below LK stays inside the group,
            // and every lane of the group ends with the same sum.
#pragma unroll
        for (int o = LK / 2; o > 0; o >>= 1)
#pragma unroll
            for (int r = 0; r < NQ; ++r)
#pragma unroll
                for (int u = 0; u < U; ++u) s[r][u] += __shfl_xor_sync(0xffffffffu, s[r][u], o);
#pragma unroll
        for (int r = 0; r < NQ; ++r) {
            T mx = neg_inf;
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const index_t j = base + u * KW + group;
                if (!ok[u]) {
                    s[r][u] = neg_inf;
                } else {
                    s[r][u] *= ks[u];
                    if (bias[r]) s[r][u] += bias[r][j];
                    if (key_bias) s[r][u] += key_bias[j];
                }
                mx = max(mx, s[r][u]);
            }
            const T m_new = max(st.m[r], mx);
            if (m_new == neg_inf) continue;               // no visible key yet
            const T corr = softmax_exp(st.m[r] - m_new);  // 0 while m was −inf (l and acc are 0 then)
            st.l[r] *= corr;
#pragma unroll
            for (int t = 0; t < C; ++t) st.acc[r][t] *= corr;
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const T p = softmax_exp(s[r][u] - m_new);  // 0 for a masked key
                st.l[r] += p;
                const T pv = p * vs[u];
#pragma unroll
                for (int t = 0; t < C; ++t) st.acc[r][t] += pv * (Same ? kr[u][t] : vr[Same ? 0 : u][t]);
            }
            st.m[r] = m_new;
        }
    }
}

// One warp per work item: NQ query rows of a problem over one chunk of its keys (both segments
// side by side, as one (nk + nk2)-row matrix).
// Blocks per multiprocessor the register budget must allow (4: 128 registers a thread, 16 warps):
// a one-row warp is mostly loads in flight and wants company; more rows hold more registers, and
// double (the reference path) may take them all.
template <class T, int NQ, int NB>
inline constexpr int min_blocks = sizeof(T) != 4 ? 1
    : NQ == 1 && NB == 1                         ? 4
    : NQ* NB <= 4                                ? 3
                                                 : 2;

template <class T, int NQ, int LK, int NB, int S>
__global__ void __launch_bounds__(threads, min_blocks<T, NQ, NB>)
    attend_chunks(const __grid_constant__ task_list<T> list, index_t items, index_t chunk_len, index_t d, T* part_ml, T* part_acc) {
    constexpr int C = shape<T, NQ, LK, NB>::C;
    constexpr T neg_inf = -static_cast<T>(INFINITY);
    const index_t w = static_cast<index_t>(blockIdx.x) * warps_per_block + threadIdx.x / 32;
    if (w >= items) return;  // the whole warp leaves: no shuffle below runs with lanes missing
    const int lane = static_cast<int>(threadIdx.x % 32), g = lane % LK, group = lane / LK;
    const task<T>& tk = task_of<false>(list.begin(), list.count, w);
    const ops::attention_problem<T>& p = tk.p;
    const index_t local = w - tk.item_begin, chunk = local / tk.row_groups, i0 = local % tk.row_groups * NQ;
    const index_t nk = p.nk, n_all = nk + p.nk2, j0 = chunk * chunk_len, j1 = min(n_all, j0 + chunk_len);
    auto column = [&](int t) { return static_cast<index_t>(((t / run) * LK + g) * run + t % run); };

    T q[NQ][C];
    online_rows<T, NQ, C> st;
    const T* bias1[NQ];
    const T* bias2[NQ];
#pragma unroll
    for (int r = 0; r < NQ; ++r) {
        const index_t i = i0 + r;
        const bool live = i < p.nq;
#pragma unroll
        for (int t = 0; t < C; ++t) q[r][t] = live && column(t) < d ? p.q[i * p.ldq + column(t)] : T(0);
        st.m[r] = neg_inf, st.l[r] = 0;
#pragma unroll
        for (int t = 0; t < C; ++t) st.acc[r][t] = 0;
        // ldb is resolved (dense → nk): row i of a term starts at bias + i·ldb, also for 0 (one row
        // for all) and −1 (a Toeplitz band: entry (i, j) at bias[j − i]).
        bias1[r] = live && p.bias ? p.bias + i * p.ldb : nullptr;
        bias2[r] = live && p.bias2 ? p.bias2 + i * p.ldb2 : nullptr;
    }
    const bool vec = tk.vector_loads != 0;
    if (j0 < nk) {
        const auto km = rows_of<T, S>(p.k, d, vec), vm = rows_of<T, S>(p.v, d, vec);
        if (tk.same) walk<T, NQ, LK, NB, true>(st, q, km, vm, j0, min(j1, nk), bias1, p.key_bias, g, group);
        else walk<T, NQ, LK, NB, false>(st, q, km, vm, j0, min(j1, nk), bias1, p.key_bias, g, group);
    }
    if (j1 > nk) {  // (the second segment's keys and values are never one matrix)
        const auto km = rows_of<T, S>(p.k2, d, vec), vm = rows_of<T, S>(p.v2, d, vec);
        walk<T, NQ, LK, NB, false>(st, q, km, vm, max(j0, nk) - nk, j1 - nk, bias2, static_cast<const T*>(nullptr), g, group);
    }

    // The groups' states, combined by a butterfly over the groups.
#pragma unroll
    for (int o = LK; o < 32; o <<= 1)
#pragma unroll
        for (int r = 0; r < NQ; ++r) {
            const T mb = __shfl_xor_sync(0xffffffffu, st.m[r], o), lb = __shfl_xor_sync(0xffffffffu, st.l[r], o);
            T ab[C];
#pragma unroll
            for (int t = 0; t < C; ++t) ab[t] = __shfl_xor_sync(0xffffffffu, st.acc[r][t], o);
            const T M = max(st.m[r], mb);
            if (M == neg_inf) continue;
            const T ca = softmax_exp(st.m[r] - M), cb = softmax_exp(mb - M);
            st.l[r] = st.l[r] * ca + lb * cb;
#pragma unroll
            for (int t = 0; t < C; ++t) st.acc[r][t] = st.acc[r][t] * ca + ab[t] * cb;
            st.m[r] = M;
        }
    if (group != 0) return;
#pragma unroll
    for (int r = 0; r < NQ; ++r) {
        const index_t i = i0 + r;
        if (i >= p.nq) break;
        if (tk.chunks == 1) {
            T* o = p.out + i * p.ldo;
            const bool masked = st.m[r] == neg_inf;  // every key masked (or none): zeros, as on the CPU
#pragma unroll
            for (int t = 0; t < C; ++t)
                if (column(t) < d) o[column(t)] = masked ? T(0) : st.acc[r][t] / st.l[r];
            continue;
        }
        const index_t rec = tk.partial_begin + chunk * p.nq + i;
#pragma unroll
        for (int t = 0; t < C; ++t)
            if (column(t) < d) part_acc[rec * d + column(t)] = st.acc[r][t];
        if (g == 0) {
            part_ml[2 * rec] = st.m[r];
            part_ml[2 * rec + 1] = st.l[r];
        }
    }
}

// ---- the merge kernel ---------------------------------------------------------------------------

// v reduced over the block by op in a fixed tree (the same bits every run); every thread gets it.
template <class T, class Op>
__device__ inline T block_reduce(T v, T* red, Op op) {
    const int t = static_cast<int>(threadIdx.x);
    red[t] = v;
    __syncthreads();
    for (int s = merge_threads / 2; s > 0; s >>= 1) {
        if (t < s) red[t] = op(red[t], red[t + s]);
        __syncthreads();
    }
    const T out = red[0];
    __syncthreads();  // red is free again only once every thread has read it
    return out;
}

// Columns a merge block combines: a warp per slice of the chunks, 32 neighbouring columns each.
inline constexpr int merge_tile = 32;

// One block per (query row that was split, tile of 32 columns): the row's weights e^(m_c − M) are
// computed once per block, then each warp sums a slice of the chunks (c ≡ warp mod 8) for the
// tile's columns, and the slices are added in order. Blocks per row grow with the width, so a
// layer's few rows of 768 columns over a thousand chunks still spread over the whole GPU.
template <class T>
__global__ void __launch_bounds__(merge_threads)
    merge_chunks(const __grid_constant__ task_list<T> list, index_t d, const T* part_ml, const T* part_acc) {
    __shared__ T weight[max_chunks];
    __shared__ T red[merge_threads];
    constexpr T neg_inf = -static_cast<T>(INFINITY);
    constexpr int slices = merge_threads / merge_tile;
    const index_t r = blockIdx.x, col = static_cast<index_t>(blockIdx.y) * merge_tile + threadIdx.x % merge_tile;
    const int t = static_cast<int>(threadIdx.x), slice = t / merge_tile;
    const task<T>& tk = task_of<true>(list.begin(), list.count, r);
    const ops::attention_problem<T>& p = tk.p;
    const index_t i = r - tk.merge_begin, nc = tk.chunks;
    auto record = [&](index_t c) { return tk.partial_begin + c * p.nq + i; };

    T mx = neg_inf;
    for (index_t c = t; c < nc; c += merge_threads) mx = max(mx, part_ml[2 * record(c)]);
    const T M = block_reduce(mx, red, [](T a, T b) { return max(a, b); });
    T* o = p.out + i * p.ldo;
    if (M == neg_inf) {  // every key masked: zeros
        if (slice == 0 && col < d) o[col] = T(0);
        return;
    }
    T ls = 0;
    for (index_t c = t; c < nc; c += merge_threads) {
        const T m = part_ml[2 * record(c)];
        const T wc = m == neg_inf ? T(0) : softmax_exp(m - M);
        weight[c] = wc;
        ls += wc * part_ml[2 * record(c) + 1];
    }
    const T l = block_reduce(ls, red, [](T a, T b) { return a + b; });  // (its barriers also publish weight[])
    T s = 0;
    if (col < d)
        for (index_t c = slice; c < nc; c += slices) s += weight[c] * part_acc[record(c) * d + col];
    red[t] = s;
    __syncthreads();
    if (slice == 0 && col < d) {
        T total = 0;
        for (int k = 0; k < slices; ++k) total += red[k * merge_tile + t];
        o[col] = total / l;
    }
}

}  // namespace locost::cuda_detail::attention_kernels
