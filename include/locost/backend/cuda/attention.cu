// Attention on the GPU: ops::attention (a batch of independent problems, each one head of one
// sequence, with the bias terms, second key segment and cache precisions that ops/attention.hpp
// states) and ops::shared_kv_attention (many queries over one long matrix that is both keys and
// values). Both run the same two kernels; the CPU kernels (backend/cpu/attention.hpp and
// backend/cpu/shared_kv_attention.hpp) compute the same numbers.
//
// Design. The unit of work is one warp: one query row of one problem over one chunk of its keys
// (both segments side by side, as if one (nk + nk2)-row matrix). The warp's lanes split d (lane
// owns columns lane + 32·t, t < CPL, the query and the running output in registers); it walks its
// keys in order with an online softmax, a few rows loaded at once: score by a butterfly sum over
// the lanes (every lane ends with the same bits, so the softmax state is identical in all of them
// and no branch diverges), then the running max m, sum l and unnormalised output acc are updated,
// with at most one exp per key. No score is stored, so a row costs O(d) registers whatever nk is:
// a decoding step over a 700K-token book never holds its scores, where a block per row holding
// them in shared memory could not.
//
// Split-K ("flash-decoding"): one warp per query row would leave an H100 idle while 48 rows walk
// 700K keys each, so long rows are cut into chunks of equal length, each chunk a warp of its own
// that writes its partial (m, l, acc); a merge kernel (one block per such row) then combines them,
// out = Σ_c e^(m_c − M)·acc_c / Σ_c e^(m_c − M)·l_c with M = max_c m_c, in chunk order. The chunk
// length is chosen per call from the total work (about 32K warps, at least 128 keys a chunk), and
// lengthened so that the partials stay under 64 MB. A row whose keys fit one chunk (encoder
// attention, short decoder caches) writes its output directly and costs no partial memory.
// Work items are ordered chunk-major within a problem (item = chunk·nq + row), so the warps of a
// block are neighbouring query rows over the same keys and read them once from memory, the
// others from cache: shared_kv_attention is this with a single problem whose keys and values are
// the states matrix, and so reads the matrix about once per call (not once per query), with the
// rows of one chunk also sharing each loaded key row for both products.
//
// Memory per call: the problem descriptors (about 260 bytes each) and the partials (at most
// 64 MB), in one device buffer taken from the caching allocator for the call. Every reduction runs in a fixed order for a given call,
// so results do not depend on timing. Scores, softmax and sums are in the scalar type: float32
// for float, as on the CPU, and double for the double reference path.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "runtime.cuh"
#include "workspace.hpp"

namespace locost::cuda_detail::attention_kernels {

inline constexpr int warps_per_block = 4;
inline constexpr int threads = warps_per_block * 32;
// Widest rows the register tiles hold: 32 columns per lane. Attention heads are 64 wide, folded
// cross-attention's states d_model (at most 1024 in the supported models).
inline constexpr index_t max_width = 1024;

// A problem as the kernels read it: the op's fields with dense bias strides resolved to nk resp.
// nk2, and where its work items, partial records and merge rows start.
template <class T>
struct task {
    ops::attention_problem<T> p;
    index_t chunks = 1;          // key chunks per query row
    index_t item_begin = 0;      // first work item (warp); item = item_begin + chunk·nq + row
    index_t partial_begin = 0;   // first partial record (chunks > 1), record = partial_begin + chunk·nq + row
    index_t merge_begin = 0;     // first merge row (chunks > 1): merge row = merge_begin + row
};

// The task that owns work item (or merge row) w: the last one whose begin is ≤ w. A task with no
// merge rows starts where the next one does and loses that tie, so the one found always holds w.
template <class T, bool Merge>
__device__ inline const task<T>& task_of(const task<T>* tasks, index_t ntasks, index_t w) {
    index_t lo = 0, hi = ntasks - 1;
    while (lo < hi) {
        const index_t mid = (lo + hi + 1) / 2;
        const index_t begin = Merge ? tasks[mid].merge_begin : tasks[mid].item_begin;
        if (begin <= w) lo = mid;
        else hi = mid - 1;
    }
    return tasks[lo];
}

// Row j of a stored K/V matrix, widened to T exactly as the CPU's kv_rows does (int8: the value
// times the row's scale, in T); lanes past d get zeros, which add nothing to a score.
template <class T, int CPL>
__device__ inline void load_row(const ops::kv_matrix& m, index_t j, index_t d, int lane, T (&r)[CPL]) {
    switch (m.precision) {
    case ops::kv_precision::native: {
        const T* row = static_cast<const T*>(m.data) + j * m.ld;
#pragma unroll
        for (int t = 0; t < CPL; ++t) {
            const index_t c = lane + 32 * t;
            r[t] = c < d ? row[c] : T(0);
        }
        break;
    }
    case ops::kv_precision::f32: {
        const float* row = static_cast<const float*>(m.data) + j * m.ld;
#pragma unroll
        for (int t = 0; t < CPL; ++t) {
            const index_t c = lane + 32 * t;
            r[t] = c < d ? static_cast<T>(row[c]) : T(0);
        }
        break;
    }
    case ops::kv_precision::bf16: {
        const auto* row = static_cast<const std::uint16_t*>(m.data) + j * m.ld;
#pragma unroll
        for (int t = 0; t < CPL; ++t) {
            const index_t c = lane + 32 * t;
            r[t] = c < d ? static_cast<T>(__uint_as_float(static_cast<unsigned>(row[c]) << 16)) : T(0);
        }
        break;
    }
    case ops::kv_precision::i8:
    default: {  // (the CPU's kv_rows reads any other value as int8 too)
        const auto* row = static_cast<const std::int8_t*>(m.data) + j * m.ld;
        const T s = static_cast<T>(m.scale[j]);
#pragma unroll
        for (int t = 0; t < CPL; ++t) {
            const index_t c = lane + 32 * t;
            r[t] = c < d ? static_cast<T>(row[c]) * s : T(0);
        }
        break;
    }
    }
}

// The online softmax state of one query row, replicated in every lane of its warp (m and l are
// the same in all lanes; acc holds the lane's columns).
template <class T, int CPL>
struct online_row {
    T m = -static_cast<T>(INFINITY), l = 0;
    T acc[CPL] = {};

    // Adds key value row v with score s. A larger score rescales what came before by e^(m − s)
    // and enters with weight 1; any other finite one enters with e^(s − m); −inf (masked) adds
    // nothing. So one exp per key, and the first finite key finds l = 0 and acc = 0 to scale.
    __device__ void add(T s, const T (&v)[CPL]) {
        if (s > m) {
            const T r = exp(m - s);
            l = l * r + T(1);
#pragma unroll
            for (int t = 0; t < CPL; ++t) acc[t] = acc[t] * r + v[t];
            m = s;
        } else if (s != -static_cast<T>(INFINITY)) {
            const T e = exp(s - m);
            l += e;
#pragma unroll
            for (int t = 0; t < CPL; ++t) acc[t] += e * v[t];
        }
    }
};

// Keys j .. j + U − 1 for query registers q: score = q·k + bias row entry + key bias (the CPU's
// order of the three terms), then the online updates with the value rows, in key order. All U
// rows are loaded before the first score is reduced, and the U butterflies are interleaved, so
// their memory latencies and shuffle chains overlap where one key at a time would wait for each;
// the result is bit for bit that of one key at a time. Same: the values are the keys
// (shared_kv_attention), and the row loaded for the score serves the update too.
template <class T, int CPL, int U, bool Same>
__device__ inline void walk_keys(online_row<T, CPL>& st, const T (&q)[CPL], const ops::kv_matrix& km, const ops::kv_matrix& vm, index_t j,
                                 const T* bias_row, const T* key_bias, index_t d, int lane) {
    T k[U][CPL];
    T v[Same ? 1 : U][CPL];
#pragma unroll
    for (int u = 0; u < U; ++u) load_row(km, j + u, d, lane, k[u]);
    if constexpr (!Same) {
#pragma unroll
        for (int u = 0; u < U; ++u) load_row(vm, j + u, d, lane, v[u]);
    }
    T s[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        s[u] = 0;
#pragma unroll
        for (int t = 0; t < CPL; ++t) s[u] += q[t] * k[u][t];
    }
    // Butterfly: lane x adds lane x^o's value, and a + b == b + a, so all lanes end equal.
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
        for (int u = 0; u < U; ++u) s[u] += __shfl_xor_sync(0xffffffffu, s[u], o);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
        if (bias_row) s[u] += bias_row[j + u];
        if (key_bias) s[u] += key_bias[j + u];
        if constexpr (Same) st.add(s[u], k[u]);
        else st.add(s[u], v[u]);
    }
}

// Keys [b, e) of one segment: groups of U (more for narrow rows, whose registers allow it), then
// the remainder one at a time.
template <class T, int CPL, bool Same>
__device__ inline void walk_range(online_row<T, CPL>& st, const T (&q)[CPL], const ops::kv_matrix& km, const ops::kv_matrix& vm, index_t b,
                                  index_t e, const T* bias_row, const T* key_bias, index_t d, int lane) {
    constexpr int U = CPL <= 8 ? 4 : 2;
    index_t j = b;
    for (; j + U <= e; j += U) walk_keys<T, CPL, U, Same>(st, q, km, vm, j, bias_row, key_bias, d, lane);
    for (; j < e; ++j) walk_keys<T, CPL, 1, Same>(st, q, km, vm, j, bias_row, key_bias, d, lane);
}

template <class T, int CPL>
__device__ inline void walk(online_row<T, CPL>& st, const T (&q)[CPL], const ops::kv_matrix& km, const ops::kv_matrix& vm, index_t b,
                            index_t e, const T* bias_row, const T* key_bias, index_t d, int lane) {
    const bool same = km.data == vm.data && km.precision == vm.precision && km.ld == vm.ld && km.scale == vm.scale;
    if (same) walk_range<T, CPL, true>(st, q, km, vm, b, e, bias_row, key_bias, d, lane);
    else walk_range<T, CPL, false>(st, q, km, vm, b, e, bias_row, key_bias, d, lane);
}

// One warp per work item (problem, chunk, query row); see the file comment.
template <class T, int CPL>
__global__ void __launch_bounds__(threads) attention_chunks(const task<T>* tasks, index_t ntasks, index_t items, index_t chunk_len,
                                                            index_t d, T* part_ml, T* part_acc) {
    const index_t w = static_cast<index_t>(blockIdx.x) * warps_per_block + threadIdx.x / 32;
    const int lane = static_cast<int>(threadIdx.x % 32);
    if (w >= items) return;  // the whole warp leaves: no shuffle below runs with lanes missing
    const task<T>& tk = task_of<T, false>(tasks, ntasks, w);
    const ops::attention_problem<T>& p = tk.p;
    const index_t local = w - tk.item_begin, chunk = local / p.nq, i = local % p.nq;
    const index_t n_all = p.nk + p.nk2, j0 = chunk * chunk_len, j1 = min(n_all, j0 + chunk_len);

    T q[CPL];
#pragma unroll
    for (int t = 0; t < CPL; ++t) {
        const index_t c = lane + 32 * t;
        q[t] = c < d ? p.q[i * p.ldq + c] : T(0);
    }
    online_row<T, CPL> st;
    // ldb is resolved (dense → nk): row i of a term is at bias + i·ldb, also for 0 (one row for
    // all) and −1 (Toeplitz band: entry (i, j) at bias[j − i]).
    if (j0 < p.nk)
        walk(st, q, p.k, p.v, j0, min(j1, p.nk), p.bias ? p.bias + i * p.ldb : nullptr, p.key_bias, d, lane);
    if (j1 > p.nk)
        walk(st, q, p.k2, p.v2, max(j0, p.nk) - p.nk, j1 - p.nk, p.bias2 ? p.bias2 + i * p.ldb2 : nullptr, static_cast<const T*>(nullptr),
             d, lane);

    if (tk.chunks == 1) {
        T* o = p.out + i * p.ldo;
        const bool masked = st.m == -static_cast<T>(INFINITY);  // every key masked (or none): zeros, as on the CPU
#pragma unroll
        for (int t = 0; t < CPL; ++t) {
            const index_t c = lane + 32 * t;
            if (c < d) o[c] = masked ? T(0) : st.acc[t] / st.l;
        }
        return;
    }
    const index_t rec = tk.partial_begin + chunk * p.nq + i;
#pragma unroll
    for (int t = 0; t < CPL; ++t) {
        const index_t c = lane + 32 * t;
        if (c < d) part_acc[rec * d + c] = st.acc[t];
    }
    if (lane == 0) {
        part_ml[2 * rec] = st.m;
        part_ml[2 * rec + 1] = st.l;
    }
}

// One block per query row that was split: its chunks' partials combined in chunk order. Every
// thread computes the same M and l (same operations, same order) and then its own columns.
template <class T>
__global__ void __launch_bounds__(threads) merge_chunks(const task<T>* tasks, index_t ntasks, index_t d, const T* part_ml,
                                                        const T* part_acc) {
    const index_t r = blockIdx.x;
    const task<T>& tk = task_of<T, true>(tasks, ntasks, r);
    const ops::attention_problem<T>& p = tk.p;
    const index_t i = r - tk.merge_begin;
    constexpr T neg_inf = -static_cast<T>(INFINITY);
    auto record = [&](index_t c) { return tk.partial_begin + c * p.nq + i; };
    T M = neg_inf;
    for (index_t c = 0; c < tk.chunks; ++c) M = max(M, part_ml[2 * record(c)]);
    T* o = p.out + i * p.ldo;
    if (M == neg_inf) {  // every key masked: zeros
        for (index_t col = threadIdx.x; col < d; col += threads) o[col] = T(0);
        return;
    }
    T l = 0;
    for (index_t c = 0; c < tk.chunks; ++c) {
        const T m = part_ml[2 * record(c)];
        if (m != neg_inf) l += exp(m - M) * part_ml[2 * record(c) + 1];
    }
    for (index_t col = threadIdx.x; col < d; col += threads) {
        T s = 0;
        for (index_t c = 0; c < tk.chunks; ++c) {
            const T m = part_ml[2 * record(c)];
            if (m != neg_inf) s += exp(m - M) * part_acc[record(c) * d + col];
        }
        o[col] = s / l;
    }
}

template <class T>
using chunks_kernel = void (*)(const task<T>*, index_t, index_t, index_t, index_t, T*, T*);

// The register tile for rows of width d: CPL columns per lane, the smallest instantiated ≥ d/32.
template <class T>
chunks_kernel<T> chunks_kernel_for(index_t d) {
    if (d <= 32) return attention_chunks<T, 1>;
    if (d <= 64) return attention_chunks<T, 2>;
    if (d <= 128) return attention_chunks<T, 4>;
    if (d <= 256) return attention_chunks<T, 8>;
    if (d <= 512) return attention_chunks<T, 16>;
    if (d <= 768) return attention_chunks<T, 24>;
    return attention_chunks<T, 32>;
}

inline std::size_t round_up(std::size_t n) { return (n + 255) / 256 * 256; }

template <class T>
void solve(const std::vector<ops::attention_problem<T>>& problems, index_t d) {
    if (d <= 0) return;  // outputs of width 0: nothing to write
    if (d > max_width)
        throw error("cuda.unsupported", "attention over rows of width " + std::to_string(d) + ": the CUDA backend's kernel takes at most " +
                                            std::to_string(max_width));
    // The keys every query row visits; empty problems (no keys) still give each row one item, which
    // writes its zeros.
    index_t total = 0;
    for (const auto& p : problems)
        if (p.nq > 0) total += p.nq * std::max<index_t>(1, p.nk + p.nk2);
    if (total == 0) return;

    constexpr index_t target_items = 32768, min_chunk = 128;
    constexpr index_t partial_budget = cuda_workspace::attention_partial_bytes;
    const index_t record_bytes = (d + 2) * static_cast<index_t>(sizeof(T));
    // total·record_bytes < 2^63 for any input that fits a GPU (total < 10^12 keys·rows).
    const index_t chunk_len = std::max({min_chunk, (total + target_items - 1) / target_items,
                                        (total * record_bytes + partial_budget - 1) / partial_budget});

    std::vector<task<T>> tasks;
    tasks.reserve(problems.size());
    index_t items = 0, records = 0, merge_rows = 0;
    for (const auto& p : problems) {
        if (p.nq <= 0) continue;
        task<T> tk;
        tk.p = p;
        if (p.ldb == ops::dense_bias) tk.p.ldb = p.nk;
        if (p.ldb2 == ops::dense_bias) tk.p.ldb2 = p.nk2;
        tk.chunks = std::max<index_t>(1, (p.nk + p.nk2 + chunk_len - 1) / chunk_len);
        tk.item_begin = items;
        items += p.nq * tk.chunks;
        tk.partial_begin = records;
        tk.merge_begin = merge_rows;
        if (tk.chunks > 1) {
            records += p.nq * tk.chunks;
            merge_rows += p.nq;
        }
        tasks.push_back(tk);
    }
    const index_t blocks = (items + warps_per_block - 1) / warps_per_block;
    if (blocks > std::numeric_limits<int>::max() || merge_rows > std::numeric_limits<int>::max())
        throw error("cuda.unsupported", "attention: " + std::to_string(items) + " query rows in one call exceed the CUDA grid");

    const std::size_t task_bytes = round_up(tasks.size() * sizeof(task<T>));
    const std::size_t ml_bytes = round_up(static_cast<std::size_t>(records) * 2 * sizeof(T));
    // One block from the backend's caching allocator, freed on return: the stream's order keeps a
    // later call that gets the same block behind this call's kernels.
    tensor<std::byte, cuda> buffer({static_cast<index_t>(task_bytes + ml_bytes + static_cast<std::size_t>(records * d) * sizeof(T))});
    std::byte* base = buffer.data();
    auto* dev_tasks = reinterpret_cast<task<T>*>(base);
    T* part_ml = reinterpret_cast<T*>(base + task_bytes);
    T* part_acc = reinterpret_cast<T*>(base + task_bytes + ml_bytes);
    // From pageable memory the copy returns once the descriptors are staged (CUDA's API
    // synchronization notes), so `tasks` may go away when this returns, and the host does not wait
    // for the GPU; on the stream it runs after the previous call's kernels.
    const cudaStream_t stream = cuda_context::current().stream();
    check(cudaMemcpyAsync(dev_tasks, tasks.data(), tasks.size() * sizeof(task<T>), cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync(attention descriptors, host to device)");
    const auto ntasks = static_cast<index_t>(tasks.size());
    launch(chunks_kernel_for<T>(d), static_cast<unsigned>(blocks), threads, "attention_chunks", dev_tasks, ntasks, items, chunk_len, d,
           part_ml, part_acc);
    if (merge_rows > 0)
        launch(merge_chunks<T>, static_cast<unsigned>(merge_rows), threads, "merge_chunks", dev_tasks, ntasks, d,
               static_cast<const T*>(part_ml), static_cast<const T*>(part_acc));
}

} // namespace locost::cuda_detail::attention_kernels

namespace locost {

template <class T>
void kernel<ops::attention_op, cuda, T>::run(const std::vector<ops::attention_problem<T>>& problems, index_t d) {
    cuda_detail::attention_kernels::solve(problems, d);
}

// One problem whose keys and values are the states: the kernels see that the two matrices are the
// same and load each row once for both products. `products` is not used: the GPU computes exactly
// (ops/attention.hpp allows a backend without bfloat16 products to).
template <class T>
void kernel<ops::shared_kv_attention_op, cuda, T>::run(const T* q, index_t nq, index_t ldq, const ops::kv_matrix& states, index_t nk,
                                                       index_t d, T* out, index_t ldo, ops::attention_products products) {
    (void)products;
    ops::attention_problem<T> p;
    p.q = q;
    p.nq = nq;
    p.ldq = ldq;
    p.k = p.v = states;
    p.nk = nk;
    p.out = out;
    p.ldo = ldo;
    cuda_detail::attention_kernels::solve(std::vector<ops::attention_problem<T>>{p}, d);
}

LOCOST_CUDA_OP_KERNEL(ops::attention_op);
LOCOST_CUDA_OP_KERNEL(ops::shared_kv_attention_op);

} // namespace locost
