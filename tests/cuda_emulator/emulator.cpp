// The host emulation of CUDA, cuBLAS and cuFFT declared in this folder's headers (emulator.hpp
// says what it checks and what it cannot).
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <Eigen/Dense>
#include <boost/context/fiber.hpp>
#include <cstdio>
#include <cstdlib>
#include <fftw3.h>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "cublas_v2.h"
#include "cuda_bf16.h"
#include "cuda_runtime.h"
#include "cufft.h"
#include "traffic.hpp"

namespace ctx = boost::context;

struct locost_emulated_stream {
    int id;
};
struct locost_emulated_blas {
    cudaStream_t stream = nullptr;
};

namespace locost_emulator {
namespace {

// ---- traffic (traffic.hpp) --------------------------------------------------------------------------
std::mutex traffic_mutex;
traffic_counts counted;

// Adds to the counts under the lock (any thread may issue CUDA calls).
template <class F>
void count(F&& f) {
    std::lock_guard lock(traffic_mutex);
    f(counted);
}

void count_copy(cudaMemcpyKind kind, std::size_t bytes) {
    count([&](traffic_counts& t) {
        if (kind == cudaMemcpyHostToDevice) t.host_to_device++, t.host_to_device_bytes += bytes;
        else if (kind == cudaMemcpyDeviceToHost) t.device_to_host++, t.device_to_host_bytes += bytes;
        else if (kind == cudaMemcpyDeviceToDevice) t.device_to_device++;
    });
}

// ---- errors --------------------------------------------------------------------------------------
// The calling thread's pending error: set by a failed launch or kernel fault, returned (and cleared)
// by the next cudaGetLastError, synchronisation or copy. (On a GPU a fault also poisons the context
// for good; here the tests may go on after reporting it.)
thread_local cudaError_t pending = cudaSuccess;

cudaError_t take_pending() {
    const cudaError_t e = pending;
    pending = cudaSuccess;
    return e;
}

void report(const std::string& what) { std::fprintf(stderr, "locost CUDA emulator: %s\n", what.c_str()); }

// The streams made and not yet destroyed. A real driver given a destroyed stream may crash the
// process (it did, at exit, on an H200), so a call naming one stops the program here with what it
// was: a use after destruction must not pass on the emulator. Never destroyed, since streams are
// used and destroyed during the process's exit.
struct stream_registry {
    std::mutex m;
    std::unordered_set<const locost_emulated_stream*> live;
};
stream_registry& streams() {
    static stream_registry* r = new stream_registry;
    return *r;
}
void require_live(cudaStream_t s, const char* call) {
    if (!s) return;  // the legacy default stream
    {
        stream_registry& r = streams();
        const std::lock_guard lock(r.m);
        if (r.live.count(s)) return;
    }
    report(std::string(call) + " on a stream that was destroyed (or never made)");
    std::abort();
}

// ---- device memory ---------------------------------------------------------------------------------
std::mutex memory_mutex;
std::map<std::uintptr_t, std::size_t> allocations;  // start → bytes
std::size_t allocated_bytes = 0;

std::size_t capacity() {
    static const std::size_t c = [] {
        const char* s = std::getenv("LOCOST_CUDA_EMULATOR_MEMORY");
        return s && *s ? static_cast<std::size_t>(std::strtoull(s, nullptr, 10)) : std::size_t(16) << 30;
    }();
    return c;
}

// Whether [p, p + bytes) lies inside one device allocation.
bool on_device(const void* p, std::size_t bytes) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    std::lock_guard lock(memory_mutex);
    auto it = allocations.upper_bound(a);
    if (it == allocations.begin()) return false;
    --it;
    return a >= it->first && a - it->first + bytes <= it->second;
}

bool check_device(const void* p, std::size_t bytes, const char* call, const char* operand) {
    if (bytes == 0 || on_device(p, bytes)) return true;
    report(std::string(call) + ": " + operand + " (" + std::to_string(bytes) + " bytes) is not inside one device allocation");
    return false;
}

// ---- fibers ------------------------------------------------------------------------------------------
constexpr std::size_t stack_bytes = 256 * 1024;

// Stacks with a guard page below, kept per OS thread for the next block.
struct stack_pool {
    std::vector<void*> free;
    ~stack_pool() {
        for (void* p : free) munmap(p, stack_bytes + page());
    }
    static std::size_t page() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }
    void* take() {
        if (!free.empty()) {
            void* p = free.back();
            free.pop_back();
            return p;
        }
        void* p = mmap(nullptr, stack_bytes + page(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        mprotect(p, page(), PROT_NONE);
        return p;
    }
};
thread_local stack_pool stacks;

struct pooled_stack {
    ctx::stack_context allocate() {
        ctx::stack_context sc;
        sc.size = stack_bytes;
        sc.sp = static_cast<char*>(stacks.take()) + stack_pool::page() + stack_bytes;
        return sc;
    }
    void deallocate(ctx::stack_context& sc) noexcept {
        stacks.free.push_back(static_cast<char*>(sc.sp) - stack_bytes - stack_pool::page());
    }
};

enum class state { ready, block_wait, warp_wait, done, fault };

struct emulated_thread {
    ctx::fiber self, back;
    state st = state::ready;
    unsigned index = 0;
    const char* exchange = nullptr;  // the shuffle it waits in
    std::size_t exchange_bytes = 0;
};

struct block_run {
    std::vector<emulated_thread> threads;
    std::vector<unsigned char> slots;  // 16 bytes per thread
    std::string fault;
};

// LOCOST_CUDA_EMULATOR_REVERSE=1 runs the blocks of a launch, and the threads of a block between
// barriers, last first: a kernel that needs an order CUDA does not promise (a read of what another
// thread writes with no barrier between) fails in one of the two orders.
bool reversed() {
    static const bool r = [] {
        const char* s = std::getenv("LOCOST_CUDA_EMULATOR_REVERSE");
        return s && *s && std::string(s) != "0";
    }();
    return r;
}

thread_local block_run* current_block = nullptr;
thread_local emulated_thread* current_thread = nullptr;

void yield() {
    emulated_thread* t = current_thread;
    t->back = std::move(t->back).resume();
    current_thread = t;
}

[[noreturn]] void fault(const std::string& why) {
    current_block->fault = why;
    current_thread->st = state::fault;
    yield();
    std::abort();  // a faulted thread is never resumed
}

// Runs one block; returns false (with run.fault set) on a kernel fault.
bool run_block(block_run& run, unsigned n, void (*body)(void*), void* arg) {
    run.threads.clear();
    run.threads.resize(n);
    run.slots.assign(static_cast<std::size_t>(n) * 16, 0);
    run.fault.clear();
    for (unsigned i = 0; i < n; ++i) {
        emulated_thread* t = &run.threads[i];
        t->index = i;
        t->self = ctx::fiber(std::allocator_arg, pooled_stack{}, [t, body, arg](ctx::fiber&& scheduler) {
            t->back = std::move(scheduler);
            body(arg);
            t->st = state::done;
            return std::move(t->back);
        });
    }
    const unsigned warps = (n + 31) / 32;
    for (;;) {
        for (unsigned k = 0; k < n; ++k) {
            emulated_thread& t = run.threads[reversed() ? n - 1 - k : k];
            if (t.st != state::ready) continue;
            current_thread = &t;
            thread_idx = {t.index, 0, 0};
            t.self = std::move(t.self).resume();
            if (t.st == state::fault) return false;
        }
        // Release what can go on: whole warps at a shuffle, then the block at a barrier.
        bool released = false;
        for (unsigned w = 0; w < warps; ++w) {
            const unsigned b = w * 32, e = std::min(n, b + 32);
            unsigned waiting = 0, done = 0;
            for (unsigned i = b; i < e; ++i) {
                waiting += run.threads[i].st == state::warp_wait;
                done += run.threads[i].st == state::done;
            }
            if (!waiting) continue;
            const emulated_thread& first = run.threads[b];
            if (waiting == e - b) {
                for (unsigned i = b; i < e; ++i) {
                    const auto& t = run.threads[i];
                    if (t.exchange != first.exchange || t.exchange_bytes != first.exchange_bytes) {
                        run.fault = "lanes of warp " + std::to_string(w) + " are in different shuffles (" + first.exchange + " and " +
                            t.exchange + ")";
                        return false;
                    }
                }
                for (unsigned i = b; i < e; ++i) run.threads[i].st = state::ready;
                released = true;
            } else if (done) {
                run.fault = std::string(first.exchange ? first.exchange : "a shuffle") + " in warp " + std::to_string(w) + " after " +
                    std::to_string(done) + " of its lanes returned";
                return false;
            }
        }
        if (released) continue;
        unsigned live = 0, at_barrier = 0;
        for (const auto& t : run.threads) {
            live += t.st != state::done;
            at_barrier += t.st == state::block_wait;
        }
        if (!live) return true;
        if (at_barrier == live) {
            for (auto& t : run.threads)
                if (t.st == state::block_wait) t.st = state::ready;
            continue;
        }
        run.fault = "deadlock: " + std::to_string(at_barrier) + " threads wait at __syncthreads while " +
            std::to_string(live - at_barrier) + " others wait in a warp shuffle that cannot complete";
        return false;
    }
}

}  // namespace

traffic_counts traffic() {
    std::lock_guard lock(traffic_mutex);
    return counted;
}

void launch(dim3 grid, dim3 block, cudaStream_t stream, void (*body)(void*), void* arg) {
    require_live(stream, "a kernel launch");
    count([](traffic_counts& t) { t.launches++; });
    const unsigned long long threads = 1ull * block.x * block.y * block.z;
    if (current_block) {
        report("a kernel launched from device code");
        pending = cudaErrorLaunchFailure;
        return;
    }
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535 || threads == 0 ||
        threads > 1024 || block.y != 1 || block.z != 1) {
        // (1-D blocks only: the backend's kernels index threads by x alone, and so does this emulation.)
        report("launch configuration grid (" + std::to_string(grid.x) + ", " + std::to_string(grid.y) + ", " + std::to_string(grid.z) +
               "), block (" + std::to_string(block.x) + ", " + std::to_string(block.y) + ", " + std::to_string(block.z) + ")");
        pending = cudaErrorInvalidConfiguration;
        return;
    }
    thread_local block_run run;
    grid_dim = grid;
    block_dim = block;
    current_block = &run;
    const bool rev = reversed();
    for (unsigned zi = 0; zi < grid.z; ++zi)
        for (unsigned yi = 0; yi < grid.y; ++yi)
            for (unsigned xi = 0; xi < grid.x; ++xi) {
                const unsigned x = rev ? grid.x - 1 - xi : xi, y = rev ? grid.y - 1 - yi : yi, z = rev ? grid.z - 1 - zi : zi;
                block_idx = {x, y, z};
                if (!run_block(run, static_cast<unsigned>(threads), body, arg)) {
                    report("kernel fault in block (" + std::to_string(x) + ", " + std::to_string(y) + ", " + std::to_string(z) +
                           "): " + run.fault);
                    run.threads.clear();  // unwinds the stopped fibers
                    current_block = nullptr;
                    current_thread = nullptr;
                    pending = cudaErrorLaunchFailure;
                    return;
                }
            }
    run.threads.clear();
    current_block = nullptr;
    current_thread = nullptr;
}

void sync_block() {
    if (!current_thread) {
        report("__syncthreads outside a kernel");
        std::abort();
    }
    current_thread->st = state::block_wait;
    yield();
}

void warp_exchange(unsigned mask, const void* v, void* out, std::size_t bytes, int src_lane, const char* what) {
    if (!current_thread) {
        report(std::string(what) + " outside a kernel");
        std::abort();
    }
    block_run& run = *current_block;
    const unsigned n = static_cast<unsigned>(run.threads.size());
    if (mask != 0xffffffffu) fault(std::string(what) + " with mask " + std::to_string(mask) + ": the backend's shuffles name every lane");
    if (n % 32 != 0) fault(std::string(what) + " in a block of " + std::to_string(n) + " threads, not whole warps");
    emulated_thread* t = current_thread;
    const unsigned warp_base = t->index / 32 * 32;
    std::memcpy(&run.slots[static_cast<std::size_t>(t->index) * 16], v, bytes);
    t->exchange = what;
    t->exchange_bytes = bytes;
    t->st = state::warp_wait;
    yield();
    std::memcpy(out, &run.slots[static_cast<std::size_t>(warp_base + static_cast<unsigned>(src_lane)) * 16], bytes);
    t->st = state::warp_wait;
    yield();
}

}  // namespace locost_emulator

using namespace locost_emulator;

// ---- the runtime ---------------------------------------------------------------------------------------
const char* cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    }
    return "unknown error";
}

const char* cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    }
    return "cudaErrorUnknown";
}

cudaError_t cudaGetLastError() { return take_pending(); }

// LOCOST_CUDA_EMULATOR_DEVICES=0 emulates a machine without a GPU.
cudaError_t cudaGetDeviceCount(int* n) {
    const char* s = std::getenv("LOCOST_CUDA_EMULATOR_DEVICES");
    *n = s && std::string(s) == "0" ? 0 : 1;
    return *n ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaGetDevice(int* device) {
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
    if (device != 0) return cudaErrorInvalidDevice;
    std::memset(p, 0, sizeof *p);
    std::snprintf(p->name, sizeof p->name, "locost CUDA host emulator");
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 1;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
    std::lock_guard lock(memory_mutex);
    *total_bytes = capacity();
    *free_bytes = capacity() - allocated_bytes;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, std::size_t bytes) {
    if (const cudaError_t e = take_pending()) return e;
    count([](traffic_counts& t) { t.mallocs++; });
    *p = nullptr;
    {
        std::lock_guard lock(memory_mutex);
        if (bytes > capacity() - allocated_bytes) return pending = cudaErrorMemoryAllocation;
        allocated_bytes += bytes;
    }
    void* q = nullptr;
    if (posix_memalign(&q, 256, bytes ? bytes : 1) != 0) {
        std::lock_guard lock(memory_mutex);
        allocated_bytes -= bytes;
        return pending = cudaErrorMemoryAllocation;
    }
    std::memset(q, 0xff, bytes);
    std::lock_guard lock(memory_mutex);
    allocations[reinterpret_cast<std::uintptr_t>(q)] = bytes;
    *p = q;
    return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
    if (!p) return cudaSuccess;
    count([](traffic_counts& t) { t.frees++; });
    {
        std::lock_guard lock(memory_mutex);
        const auto it = allocations.find(reinterpret_cast<std::uintptr_t>(p));
        if (it == allocations.end()) {
            report("cudaFree of a pointer that cudaMalloc did not return");
            return cudaErrorInvalidValue;
        }
        allocated_bytes -= it->second;
        allocations.erase(it);
    }
    std::free(p);
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
    static std::atomic<int> next{1};
    *s = new locost_emulated_stream{next++};
    auto& r = locost_emulator::streams();
    const std::lock_guard lock(r.m);
    r.live.insert(*s);
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    locost_emulator::require_live(s, "cudaStreamDestroy");
    {
        auto& r = locost_emulator::streams();
        const std::lock_guard lock(r.m);
        r.live.erase(s);
    }
    delete s;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    locost_emulator::require_live(s, "cudaStreamSynchronize");
    count([](traffic_counts& t) { t.synchronizations++; });
    return take_pending();
}

struct locost_emulated_event {
    std::chrono::steady_clock::time_point at;
    bool recorded = false;
};

cudaError_t cudaEventCreate(cudaEvent_t* e) {
    *e = new locost_emulated_event;
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    if (const cudaError_t r = take_pending()) return r;
    require_live(s, "cudaEventRecord");
    e->at = std::chrono::steady_clock::now();
    e->recorded = true;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) { return e->recorded ? take_pending() : cudaErrorInvalidValue; }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    if (!start->recorded || !end->recorded) return cudaErrorInvalidValue;
    *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
    return cudaSuccess;
}

namespace {
// A copy's operands on the side its kind says: device pointers inside one allocation, host
// pointers outside every one (a device pointer read as host memory would work here and fault on a GPU).
bool check_copy(cudaMemcpyKind kind, const void* dst, std::size_t dst_bytes, const void* src, std::size_t src_bytes, const char* call) {
    const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    bool ok = true;
    if (dst_device) ok = check_device(dst, dst_bytes, call, "the destination") && ok;
    else if (dst_bytes && on_device(dst, 1)) report(std::string(call) + ": the host destination is device memory"), ok = false;
    if (src_device) ok = check_device(src, src_bytes, call, "the source") && ok;
    else if (src_bytes && on_device(src, 1)) report(std::string(call) + ": the host source is device memory"), ok = false;
    return ok;
}
}  // namespace

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
    locost_emulator::require_live(s, "cudaMemcpyAsync");
    if (const cudaError_t e = take_pending()) return e;
    if (!check_copy(kind, dst, bytes, src, bytes, "cudaMemcpyAsync")) return cudaErrorInvalidValue;
    count_copy(kind, bytes);
    if (bytes) std::memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemcpy2DAsync(void* dst, std::size_t dpitch, const void* src, std::size_t spitch, std::size_t width, std::size_t height,
                              cudaMemcpyKind kind, cudaStream_t s) {
    locost_emulator::require_live(s, "cudaMemcpy2DAsync");
    if (const cudaError_t e = take_pending()) return e;
    if (width > dpitch || width > spitch) return cudaErrorInvalidValue;
    if (!width || !height) return cudaSuccess;
    count_copy(kind, width * height);
    if (!check_copy(kind, dst, dpitch * (height - 1) + width, src, spitch * (height - 1) + width, "cudaMemcpy2DAsync"))
        return cudaErrorInvalidValue;
    for (std::size_t r = 0; r < height; ++r)
        std::memmove(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch, width);
    return cudaSuccess;
}

// ---- cuBLAS ----------------------------------------------------------------------------------------------
namespace {

// Elements a column-major rows × cols matrix with leading dimension ld spans.
std::size_t span(long long rows, long long cols, long long ld) {
    return rows > 0 && cols > 0 ? static_cast<std::size_t>(ld * (cols - 1) + rows) : 0;
}

template <class TA>
auto widen(TA x) {
    if constexpr (std::is_same_v<TA, __nv_bfloat16>) return __bfloat162float(x);
    else return x;
}

// C (m × n) = alpha·op(A)·op(B) + beta·C, column-major, sums in Acc; C is not read when beta is 0.
template <class TA, class TC, class Acc>
cublasStatus_t gemm(const char* call, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, TC alpha, const TA* a, int lda,
                    const TA* b, int ldb, TC beta, TC* c, int ldc) {
    const bool na = ta == CUBLAS_OP_N, nb = tb == CUBLAS_OP_N;
    if (m < 0 || n < 0 || k < 0 || lda < std::max(1, na ? m : k) || ldb < std::max(1, nb ? k : n) || ldc < std::max(1, m)) {
        report(std::string(call) + ": m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " + std::to_string(k) + ", lda " +
               std::to_string(lda) + ", ldb " + std::to_string(ldb) + ", ldc " + std::to_string(ldc) + " break cuBLAS's rules");
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (!m || !n) return CUBLAS_STATUS_SUCCESS;
    const bool ok = (k == 0 ||
                     (check_device(a, span(na ? m : k, na ? k : m, lda) * sizeof(TA), call, "A") &&
                      check_device(b, span(nb ? k : n, nb ? n : k, ldb) * sizeof(TA), call, "B"))) &&
        check_device(c, span(m, n, ldc) * sizeof(TC), call, "C");
    if (!ok) return CUBLAS_STATUS_EXECUTION_FAILED;
    // Eigen's GEMM on column-major maps (bfloat16 operands widened first), so that base-size
    // models run in minutes, not hours.
    using mat = Eigen::Matrix<Acc, Eigen::Dynamic, Eigen::Dynamic>;
    using strided = Eigen::Map<const mat, 0, Eigen::OuterStride<>>;
    auto operand = [](const TA* p, int rows, int cols, int ld, std::vector<Acc>& widened) -> strided {
        if constexpr (std::is_same_v<TA, Acc>) return strided(p, rows, cols, Eigen::OuterStride<>(ld));
        else {
            widened.resize(static_cast<std::size_t>(rows) * cols);
            for (int j = 0; j < cols; ++j)
                for (int i = 0; i < rows; ++i)
                    widened[i + static_cast<std::size_t>(j) * rows] = widen(p[i + static_cast<std::size_t>(j) * ld]);
            return strided(widened.data(), rows, cols, Eigen::OuterStride<>(rows));
        }
    };
    std::vector<Acc> wa, wb;
    const strided A = operand(a, na ? m : k, na ? k : m, lda, wa), B = operand(b, nb ? k : n, nb ? n : k, ldb, wb);
    Eigen::Map<Eigen::Matrix<TC, Eigen::Dynamic, Eigen::Dynamic>, 0, Eigen::OuterStride<>> C(c, m, n, Eigen::OuterStride<>(ldc));
    mat product(m, n);
    if (k == 0) product.setZero();
    else if (na && nb) product.noalias() = A * B;
    else if (na) product.noalias() = A * B.transpose();
    else if (nb) product.noalias() = A.transpose() * B;
    else product.noalias() = A.transpose() * B.transpose();
    if (beta == TC(0)) C = (alpha * product).template cast<TC>();
    else C = (alpha * product + beta * C.template cast<Acc>()).template cast<TC>();
    return CUBLAS_STATUS_SUCCESS;
}

template <class T>
cublasStatus_t gemm_batched(const char* call, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, T alpha, const T* a, int lda,
                            long long sa, const T* b, int ldb, long long sb, T beta, T* c, int ldc, long long sc, int batch) {
    if (batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
    for (int i = 0; i < batch; ++i)
        if (const auto s = gemm<T, T, T>(call, ta, tb, m, n, k, alpha, a + i * sa, lda, b + i * sb, ldb, beta, c + i * sc, ldc);
            s != CUBLAS_STATUS_SUCCESS)
            return s;
    return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

cublasStatus_t cublasCreate(cublasHandle_t* h) {
    *h = new locost_emulated_blas;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t h) {
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float* alpha,
                           const float* a, int lda, const float* b, int ldb, const float* beta, float* c, int ldc) {
    locost_emulator::count([](locost_emulator::traffic_counts& t) { t.blas_calls++; });
    return gemm<float, float, float>("cublasSgemm", ta, tb, m, n, k, *alpha, a, lda, b, ldb, *beta, c, ldc);
}
cublasStatus_t cublasDgemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const double* alpha,
                           const double* a, int lda, const double* b, int ldb, const double* beta, double* c, int ldc) {
    locost_emulator::count([](locost_emulator::traffic_counts& t) { t.blas_calls++; });
    return gemm<double, double, double>("cublasDgemm", ta, tb, m, n, k, *alpha, a, lda, b, ldb, *beta, c, ldc);
}
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                         const float* alpha, const float* a, int lda, long long sa, const float* b, int ldb, long long sb,
                                         const float* beta, float* c, int ldc, long long sc, int batch) {
    locost_emulator::count([](locost_emulator::traffic_counts& t) { t.blas_calls++; });
    return gemm_batched<float>("cublasSgemmStridedBatched", ta, tb, m, n, k, *alpha, a, lda, sa, b, ldb, sb, *beta, c, ldc, sc, batch);
}
cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                         const double* alpha, const double* a, int lda, long long sa, const double* b, int ldb,
                                         long long sb, const double* beta, double* c, int ldc, long long sc, int batch) {
    locost_emulator::count([](locost_emulator::traffic_counts& t) { t.blas_calls++; });
    return gemm_batched<double>("cublasDgemmStridedBatched", ta, tb, m, n, k, *alpha, a, lda, sa, b, ldb, sb, *beta, c, ldc, sc, batch);
}
cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* alpha,
                            const void* a, cudaDataType ta_type, int lda, const void* b, cudaDataType tb_type, int ldb, const void* beta,
                            void* c, cudaDataType tc_type, int ldc, cublasComputeType_t compute, cublasGemmAlgo_t) {
    locost_emulator::count([](locost_emulator::traffic_counts& t) { t.blas_calls++; });
    if (ta_type == CUDA_R_16BF && tb_type == CUDA_R_16BF && tc_type == CUDA_R_32F && compute == CUBLAS_COMPUTE_32F)
        return gemm<__nv_bfloat16, float, float>("cublasGemmEx", ta, tb, m, n, k, *static_cast<const float*>(alpha),
                                                 static_cast<const __nv_bfloat16*>(a), lda, static_cast<const __nv_bfloat16*>(b), ldb,
                                                 *static_cast<const float*>(beta), static_cast<float*>(c), ldc);
    if (ta_type == CUDA_R_8I && tb_type == CUDA_R_8I && tc_type == CUDA_R_32I && compute == CUBLAS_COMPUTE_32I) {
        // cuBLAS documents its int8 path for alpha and beta of 0 or 1, A and B aligned to 4 bytes
        // and lda, ldb multiples of 4: held here, so that a call the library would refuse fails.
        const std::int32_t al = *static_cast<const std::int32_t*>(alpha), be = *static_cast<const std::int32_t*>(beta);
        if ((al != 0 && al != 1) || (be != 0 && be != 1) || reinterpret_cast<std::uintptr_t>(a) % 4 ||
            reinterpret_cast<std::uintptr_t>(b) % 4 || lda % 4 || ldb % 4) {
            report("cublasGemmEx(int8): alpha " + std::to_string(al) + ", beta " + std::to_string(be) + ", lda " + std::to_string(lda) +
                   ", ldb " + std::to_string(ldb) + " or an operand's alignment is outside cuBLAS's int8 rules");
            return CUBLAS_STATUS_NOT_SUPPORTED;
        }
        return gemm<std::int8_t, std::int32_t, std::int32_t>("cublasGemmEx", ta, tb, m, n, k, al, static_cast<const std::int8_t*>(a), lda,
                                                             static_cast<const std::int8_t*>(b), ldb, be, static_cast<std::int32_t*>(c),
                                                             ldc);
    }
    report("cublasGemmEx: the emulator has only bfloat16 inputs with float32 outputs and sums, and int8 inputs with int32 ones");
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

// ---- cuFFT -----------------------------------------------------------------------------------------------
namespace {

struct fft_plan {
    cufftType type;
    int n = 0, batch = 0;
    fftwf_plan f = nullptr;
    fftw_plan d = nullptr;
};
std::mutex fft_mutex;                          // FFTW's planner is not thread-safe
std::vector<std::unique_ptr<fft_plan>> plans;  // handle h is plans[h - 1]

fft_plan* plan_of(cufftHandle h) {
    std::lock_guard lock(fft_mutex);
    return h >= 1 && static_cast<std::size_t>(h) <= plans.size() ? plans[static_cast<std::size_t>(h - 1)].get() : nullptr;
}

}  // namespace

cufftResult cufftPlanMany(cufftHandle* handle, int rank, int* n, int* inembed, int, int, int* onembed, int, int, cufftType type,
                          int batch) {
    if (rank != 1 || inembed || onembed) {
        report("cufftPlanMany: the emulator has 1-D transforms in the basic layout only");
        return CUFFT_NOT_SUPPORTED;
    }
    if (n[0] < 1 || batch < 1) return CUFFT_INVALID_SIZE;
    auto p = std::make_unique<fft_plan>();
    p->type = type;
    p->n = n[0];
    p->batch = batch;
    const std::size_t real = static_cast<std::size_t>(n[0]) * batch, spec = static_cast<std::size_t>(n[0] / 2 + 1) * batch;
    const int nc = n[0] / 2 + 1;
    const unsigned flags = FFTW_ESTIMATE | FFTW_UNALIGNED;
    std::lock_guard lock(fft_mutex);
    switch (type) {
    case CUFFT_R2C:
    case CUFFT_C2R: {
        float* r = fftwf_alloc_real(real);
        fftwf_complex* s = fftwf_alloc_complex(spec);
        p->f = type == CUFFT_R2C ? fftwf_plan_many_dft_r2c(1, n, batch, r, nullptr, 1, n[0], s, nullptr, 1, nc, flags)
                                 : fftwf_plan_many_dft_c2r(1, n, batch, s, nullptr, 1, nc, r, nullptr, 1, n[0], flags);
        fftwf_free(r);
        fftwf_free(s);
        if (!p->f) return CUFFT_ALLOC_FAILED;
        break;
    }
    case CUFFT_D2Z:
    case CUFFT_Z2D: {
        double* r = fftw_alloc_real(real);
        fftw_complex* s = fftw_alloc_complex(spec);
        p->d = type == CUFFT_D2Z ? fftw_plan_many_dft_r2c(1, n, batch, r, nullptr, 1, n[0], s, nullptr, 1, nc, flags)
                                 : fftw_plan_many_dft_c2r(1, n, batch, s, nullptr, 1, nc, r, nullptr, 1, n[0], flags);
        fftw_free(r);
        fftw_free(s);
        if (!p->d) return CUFFT_ALLOC_FAILED;
        break;
    }
    default: return CUFFT_INVALID_VALUE;
    }
    plans.push_back(std::move(p));
    *handle = static_cast<cufftHandle>(plans.size());
    return CUFFT_SUCCESS;
}

cufftResult cufftSetStream(cufftHandle h, cudaStream_t) { return plan_of(h) ? CUFFT_SUCCESS : CUFFT_INVALID_PLAN; }

cufftResult cufftDestroy(cufftHandle h) {
    fft_plan* p = plan_of(h);
    if (!p) return CUFFT_INVALID_PLAN;
    std::lock_guard lock(fft_mutex);
    if (p->f) fftwf_destroy_plan(p->f);
    if (p->d) fftw_destroy_plan(p->d);
    plans[static_cast<std::size_t>(h - 1)].reset();
    return CUFFT_SUCCESS;
}

namespace {
// Runs plan h, if it is of this type and its operands are device memory of its sizes.
template <class Real, class Complex>
cufftResult execute(cufftHandle h, cufftType type, void* in, void* out, const char* call) {
    locost_emulator::count([](locost_emulator::traffic_counts& t) { t.fft_calls++; });
    fft_plan* p = plan_of(h);
    if (!p || p->type != type) return CUFFT_INVALID_PLAN;
    const std::size_t real = static_cast<std::size_t>(p->n) * p->batch * sizeof(Real);
    const std::size_t spec = static_cast<std::size_t>(p->n / 2 + 1) * p->batch * sizeof(Complex);
    const bool forward = type == CUFFT_R2C || type == CUFFT_D2Z;
    if (!check_device(in, forward ? real : spec, call, "the input") || !check_device(out, forward ? spec : real, call, "the output"))
        return CUFFT_EXEC_FAILED;
    if constexpr (std::is_same_v<Real, float>) {
        if (forward) fftwf_execute_dft_r2c(p->f, static_cast<float*>(in), static_cast<fftwf_complex*>(out));
        else fftwf_execute_dft_c2r(p->f, static_cast<fftwf_complex*>(in), static_cast<float*>(out));
    } else {
        if (forward) fftw_execute_dft_r2c(p->d, static_cast<double*>(in), static_cast<fftw_complex*>(out));
        else fftw_execute_dft_c2r(p->d, static_cast<fftw_complex*>(in), static_cast<double*>(out));
    }
    return CUFFT_SUCCESS;
}
}  // namespace

cufftResult cufftExecR2C(cufftHandle h, cufftReal* in, cufftComplex* out) {
    return execute<float, cufftComplex>(h, CUFFT_R2C, in, out, "cufftExecR2C");
}
cufftResult cufftExecC2R(cufftHandle h, cufftComplex* in, cufftReal* out) {
    return execute<float, cufftComplex>(h, CUFFT_C2R, in, out, "cufftExecC2R");
}
cufftResult cufftExecD2Z(cufftHandle h, cufftDoubleReal* in, cufftDoubleComplex* out) {
    return execute<double, cufftDoubleComplex>(h, CUFFT_D2Z, in, out, "cufftExecD2Z");
}
cufftResult cufftExecZ2D(cufftHandle h, cufftDoubleComplex* in, cufftDoubleReal* out) {
    return execute<double, cufftDoubleComplex>(h, CUFFT_Z2D, in, out, "cufftExecZ2D");
}
