// Attention on the GPU: ops::attention (a batch of independent problems, each one head of one
// sequence, with the bias terms, second key segment and cache precisions that ops/attention.hpp
// states) and ops::shared_kv_attention (many queries over one long matrix that is both keys and
// values). The kernels are in attention_kernels.cuh; the CPU kernels (backend/cpu/attention.hpp,
// backend/cpu/shared_kv_attention.hpp) compute the same numbers.
//
// Which kernel runs (attention_plan() names it, for tests and benchmarks):
//
//   the storage of every key and value row of the call   rows read
//   one of float32 (or float rows), bfloat16, int8, all   whole vectors, by a reader compiled for
//   aligned for vector loads (a decoding step's caches)   it (base and stride in registers)
//   anything else (mixed precisions, odd strides, double) the precision asked per row
//
//   row width d        lanes per key row (LK)   keys a warp reads at once   column blocks (NB)
//   ≤ 64               8                        4                           1
//   ≤ 128              16                       2                           1
//   ≤ 256              32                       1                           1
//   ≤ 512, 768, 1024   32                       1                           2, 3, 4
//
//   query rows of the widest problem    rows per warp (NQ)
//   1 (a greedy step, a batch's rows)   1
//   2 or more, d ≤ 256                  4   (beam hypotheses of one document; encoders' rows)
//   2 or more, d > 256                  2   (folded cross-attention: heads × hypotheses)
//   any, in double                      1
//
// Split-K ("flash-decoding"). A decoding step has one or a few query rows per head over up to
// 700K keys: one warp per row would leave most of an H100 idle. So the keys are cut into chunks
// of one length for the whole call, chosen from the work (about 64 warps per multiprocessor),
// at least 64 keys (a decoding step's self-attention over its first positions needs no merge)
// and two rounds of loads per warp, lengthened so that a row has at most max_chunks chunks and
// the partials stay under cuda_workspace::attention_partial_bytes. Each (problem, chunk, group
// of NQ rows) is one warp; rows cut into several chunks are combined by merge_chunks (one block
// per row and 32 columns, the chunks' weights computed once, the columns summed by slices of
// chunks). A row whose keys fit one chunk writes its output directly. Work items are
// chunk-major within a problem, so the warps of a block are neighbouring row groups over the
// same keys (shared_kv_attention: every (row, head) of a document over its states) and read them
// once from memory, the others from cache.
//
// Launches. Up to inline_tasks problems travel in the kernel's parameters: a decoding step's
// calls (one problem per head) copy nothing to the device and never wait. More problems (an
// encoder's batch of heads) are copied to a device buffer first. Every reduction runs in a fixed
// order, so results do not depend on timing. Scores, softmax and sums are in the scalar type:
// float32 for float, as on the CPU, and double for the double reference path.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "attention_kernels.cuh"
#include "workspace.hpp"

namespace locost::cuda_detail::attention_kernels {

namespace {

// The kernel for rows of width d and at most max_nq query rows per problem, and the storage it is
// compiled for.
struct kernel_shape {
    int lk = 8, nb = 1, nq = 1, kw = 4, u = 4;
    int storage = any_storage;
};

template <class T>
kernel_shape shape_for(index_t d, index_t max_nq) {
    kernel_shape s;
    s.lk = d <= 64 ? 8 : d <= 128 ? 16 : 32;
    s.nb = d <= 256 ? 1 : static_cast<int>((d + 255) / 256);
    // (double, the reference path, goes one row a warp: its registers would not hold more)
    s.nq = max_nq <= 1 || sizeof(T) != 4 ? 1 : s.nb == 1 ? 4 : 2;
    s.kw = 32 / s.lk;
    s.u = s.nb == 1 ? (s.nq == 1 ? 4 : 2) : (s.nq == 1 ? 2 : 1);
    return s;
}

template <class T>
using chunks_kernel = void (*)(const task_list<T>, index_t, index_t, index_t, T*, T*);

template <class T, int NQ, int S>
chunks_kernel<T> chunks_kernel_for(const kernel_shape& s) {
    if constexpr (NQ != 2) {
        if (s.nb == 1) {
            if (s.lk == 8) return attend_chunks<T, NQ, 8, 1, S>;
            if (s.lk == 16) return attend_chunks<T, NQ, 16, 1, S>;
            return attend_chunks<T, NQ, 32, 1, S>;
        }
    }
    if constexpr (NQ <= 2) {
        if (s.nb == 2) return attend_chunks<T, NQ, 32, 2, S>;
        if (s.nb == 3) return attend_chunks<T, NQ, 32, 3, S>;
        return attend_chunks<T, NQ, 32, 4, S>;
    }
    return nullptr;  // (shape_for never pairs four rows with wide columns, nor two with narrow ones)
}

template <class T, int S>
chunks_kernel<T> kernel_for_storage(const kernel_shape& s) {
    if constexpr (sizeof(T) == 4) {
        if (s.nq == 2) return chunks_kernel_for<T, 2, S>(s);
        if (s.nq == 4) return chunks_kernel_for<T, 4, S>(s);
    }
    return chunks_kernel_for<T, 1, S>(s);
}

template <class T>
chunks_kernel<T> kernel_for(const kernel_shape& s) {
    if constexpr (sizeof(T) == 4) {
        if (s.storage == f32_rows) return kernel_for_storage<T, f32_rows>(s);
        if (s.storage == bf16_rows) return kernel_for_storage<T, bf16_rows>(s);
        if (s.storage == i8_rows) return kernel_for_storage<T, i8_rows>(s);
    }
    return kernel_for_storage<T, any_storage>(s);
}

// The storage class of a matrix's rows for the stored readers (native float rows are float32 rows).
template <class T>
int storage_of(const ops::kv_matrix& m) {
    switch (m.precision) {
    case ops::kv_precision::native: return sizeof(T) == 4 ? f32_rows : any_storage;
    case ops::kv_precision::f32: return f32_rows;
    case ops::kv_precision::bf16: return bf16_rows;
    case ops::kv_precision::i8: return i8_rows;
    }
    return any_storage;
}

int multiprocessors() {
    static const int n = [] {
        int count = 0;
        cudaDeviceProp props{};
        if (cudaGetDeviceProperties(&props, cuda_context::current().device()) == cudaSuccess) count = props.multiProcessorCount;
        cudaGetLastError();
        return std::max(count, 1);
    }();
    return n;
}

// Whether m's rows can be read in aligned vectors of 8 columns of width d.
template <class T>
bool vector_rows(const ops::kv_matrix& m, index_t n, index_t d) {
    if (n == 0) return true;
    if (m.precision == ops::kv_precision::native && sizeof(T) != 4) return false;
    const std::size_t e = element_bytes(m.precision, sizeof(T)), v = std::min<std::size_t>(16, 8 * e);
    return d % 8 == 0 && reinterpret_cast<std::uintptr_t>(m.data) % v == 0 && (static_cast<std::size_t>(m.ld) * e) % v == 0;
}

bool same_matrix(const ops::kv_matrix& a, const ops::kv_matrix& b) {
    return a.data == b.data && a.precision == b.precision && a.ld == b.ld && a.scale == b.scale;
}

inline std::size_t round_up(std::size_t n) { return (n + 255) / 256 * 256; }

// A launch's tasks and geometry.
template <class T>
struct plan {
    kernel_shape shape;
    std::vector<task<T>> tasks;
    index_t chunk_len = 1, items = 0, records = 0, merge_rows = 0;
};

// chunk_override > 0 sets the chunk length (tests reach many-chunk merges on small inputs).
thread_local index_t chunk_override = 0;

template <class T>
plan<T> make_plan(const std::vector<ops::attention_problem<T>>& problems, index_t d) {
    plan<T> pl;
    index_t max_nq = 0, max_keys = 0;
    for (const auto& p : problems) {
        if (p.nq <= 0) continue;
        max_nq = std::max(max_nq, p.nq);
        max_keys = std::max(max_keys, p.nk + p.nk2);
    }
    pl.shape = shape_for<T>(d, max_nq);
    const kernel_shape& s = pl.shape;
    // Warp-keys of work, and the query rows' keys (what the partials would hold at one key a chunk).
    index_t work = 0, row_keys = 0;
    for (const auto& p : problems) {
        if (p.nq <= 0) continue;
        work += (p.nq + s.nq - 1) / s.nq * std::max<index_t>(1, p.nk + p.nk2);
        row_keys += p.nq * (p.nk + p.nk2);
    }
    // At least two rounds of loads per warp, and no split of a short range (a decoding step's
    // self-attention over its first 64 positions needs no merge launch).
    const index_t target_items = static_cast<index_t>(multiprocessors()) * 64,
                  min_chunk = std::max<index_t>(64, static_cast<index_t>(s.kw * s.u * 2));
    const index_t record_bytes = (d + 2) * static_cast<index_t>(sizeof(T));
    constexpr index_t budget = cuda_workspace::attention_partial_bytes;
    // row_keys·record_bytes < 2^63 for any input that fits a GPU (row_keys < 10^12).
    pl.chunk_len = std::max({min_chunk, (work + target_items - 1) / target_items, (max_keys + max_chunks - 1) / max_chunks,
                             (row_keys * record_bytes + budget - 1) / budget});
    if (chunk_override > 0) pl.chunk_len = std::max(chunk_override, (max_keys + max_chunks - 1) / max_chunks);
    for (const auto& p : problems) {
        if (p.nq <= 0) continue;
        task<T> tk;
        tk.p = p;
        if (p.ldb == ops::dense_bias) tk.p.ldb = p.nk;
        if (p.ldb2 == ops::dense_bias) tk.p.ldb2 = p.nk2;
        tk.row_groups = (p.nq + s.nq - 1) / s.nq;
        tk.chunks = std::max<index_t>(1, (p.nk + p.nk2 + pl.chunk_len - 1) / pl.chunk_len);
        tk.same = same_matrix(p.k, p.v);
        tk.vector_loads = vector_rows<T>(p.k, p.nk, d) && vector_rows<T>(p.v, p.nk, d) && vector_rows<T>(p.k2, p.nk2, d) &&
            vector_rows<T>(p.v2, p.nk2, d);
        tk.item_begin = pl.items;
        pl.items += tk.row_groups * tk.chunks;
        tk.partial_begin = pl.records;
        tk.merge_begin = pl.merge_rows;
        if (tk.chunks > 1) {
            pl.records += p.nq * tk.chunks;
            pl.merge_rows += p.nq;
        }
        pl.tasks.push_back(tk);
    }
    // One storage for every segment of the call, read in vectors: the kernel compiled for it.
    int storage = -1;
    bool uniform = sizeof(T) == 4;
    for (const task<T>& tk : pl.tasks) {
        uniform = uniform && tk.vector_loads;
        const ops::kv_matrix* segments[] = {&tk.p.k, &tk.p.v, &tk.p.k2, &tk.p.v2};
        for (int k = 0; k < 4; ++k) {
            if ((k < 2 ? tk.p.nk : tk.p.nk2) == 0) continue;
            const int here = storage_of<T>(*segments[k]);
            uniform = uniform && here != any_storage && (storage < 0 || storage == here);
            storage = here;
        }
    }
    pl.shape.storage = uniform && storage > 0 ? storage : any_storage;
    return pl;
}

template <class T>
std::string describe(const plan<T>& pl) {
    const kernel_shape& s = pl.shape;
    static const char* const storages[] = {"any", "float32", "bfloat16", "int8"};
    return "attend_chunks NQ=" + std::to_string(s.nq) + " LK=" + std::to_string(s.lk) + " NB=" + std::to_string(s.nb) + " " +
        storages[s.storage] + " rows, " + std::to_string(pl.tasks.size()) +
        (pl.tasks.size() <= inline_tasks ? " tasks in parameters" : " tasks in device memory") + ", chunk " + std::to_string(pl.chunk_len) +
        ", " + std::to_string(pl.items) + " warps, " + std::to_string(pl.merge_rows) + " merged rows";
}

}  // namespace

template <class T>
void solve(const std::vector<ops::attention_problem<T>>& problems, index_t d) {
    if (d <= 0) return;  // outputs of width 0: nothing to write
    if (d > max_width)
        throw error("cuda.unsupported",
                    "attention over rows of width " + std::to_string(d) + ": the CUDA backend's kernel takes at most " +
                        std::to_string(max_width));
    const plan<T> pl = make_plan(problems, d);
    if (pl.tasks.empty()) return;
    const index_t blocks = (pl.items + warps_per_block - 1) / warps_per_block;
    if (blocks > std::numeric_limits<int>::max() || pl.merge_rows > std::numeric_limits<int>::max())
        throw error("cuda.unsupported", "attention: " + std::to_string(pl.items) + " work items in one call exceed the CUDA grid");

    task_list<T> list;
    list.count = static_cast<index_t>(pl.tasks.size());
    const bool inline_list = pl.tasks.size() <= static_cast<std::size_t>(inline_tasks);
    const std::size_t task_bytes = inline_list ? 0 : round_up(pl.tasks.size() * sizeof(task<T>));
    const std::size_t ml_bytes = round_up(static_cast<std::size_t>(pl.records) * 2 * sizeof(T));
    // One block from the backend's caching allocator, freed on return: the stream's order keeps a
    // later call that gets the same block behind this call's kernels.
    const std::size_t total = task_bytes + ml_bytes + static_cast<std::size_t>(pl.records * d) * sizeof(T);
    tensor<std::byte, cuda> buffer({static_cast<index_t>(total)});
    std::byte* base = buffer.data();
    T* part_ml = reinterpret_cast<T*>(base + task_bytes);
    T* part_acc = reinterpret_cast<T*>(base + task_bytes + ml_bytes);
    const cudaStream_t stream = cuda_context::current().stream();
    if (inline_list) {
        std::copy(pl.tasks.begin(), pl.tasks.end(), list.local);
    } else {
        auto* dev_tasks = reinterpret_cast<task<T>*>(base);
        // From pageable memory the copy returns once the descriptors are staged (CUDA's API
        // synchronization notes), so `pl` may go away when this returns.
        check(cudaMemcpyAsync(dev_tasks, pl.tasks.data(), pl.tasks.size() * sizeof(task<T>), cudaMemcpyHostToDevice, stream),
              "cudaMemcpyAsync(attention descriptors, host to device)");
        list.device = dev_tasks;
    }
    launch(kernel_for<T>(pl.shape), static_cast<unsigned>(blocks), threads, "attend_chunks", list, pl.items, pl.chunk_len, d, part_ml,
           part_acc);
    if (pl.merge_rows > 0)
        launch(merge_chunks<T>, dim3(static_cast<unsigned>(pl.merge_rows), static_cast<unsigned>((d + merge_tile - 1) / merge_tile)),
               merge_threads, "merge_chunks", list, d, static_cast<const T*>(part_ml), static_cast<const T*>(part_acc));
}

}  // namespace locost::cuda_detail::attention_kernels

namespace locost {

namespace cuda_detail {

template <class T>
std::string attention_plan(const std::vector<ops::attention_problem<T>>& problems, index_t d) {
    return attention_kernels::describe(attention_kernels::make_plan(problems, d));
}
template std::string attention_plan(const std::vector<ops::attention_problem<float>>&, index_t);
template std::string attention_plan(const std::vector<ops::attention_problem<double>>&, index_t);

void set_attention_chunk(index_t keys) { attention_kernels::chunk_override = keys; }

}  // namespace cuda_detail

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

}  // namespace locost
