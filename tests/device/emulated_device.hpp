// An emulated device for the tests: a backend whose memory the host may not touch, so model code
// that would not run on a GPU fails here, on a machine without one.
//
// test::emulated computes with locost::cpu's kernels, but its tensors live in one arena that is
// mapped PROT_NONE except while one of its kernels or transfers runs. Model code that reads or
// writes backend memory directly (a memcpy into a cache, a mask applied in a host loop, logits
// read where they were computed), which the CUDA backend cannot serve, faults at that line; the
// fault handler says so before the test dies. What passes here has been proved to reach its
// backend only through ops, memory<> and transfer<>: the part of a GPU run that is host-side
// orchestration, which is checked without a GPU. The kernels themselves are the CPU's, so the
// numbers must equal the CPU backend's (tests compare them), while the CUDA kernels stay
// unverified until a GPU runs tests/cuda/test_cuda.cpp.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cxxabi.h>

#include <algorithm>

#include <cstdlib>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <typeinfo>
#include <utility>

#include <locost/backend/backend.hpp>
#include <locost/config/error.hpp>
#include <locost/ops/attention.hpp>
#include <locost/ops/linear.hpp>
#include <locost/ops/ssm_kernels.hpp>
#include <string>
#include <type_traits>
#include <vector>

namespace test {

struct emulated {
    static constexpr const char* name = "emulated";
};

namespace emulated_detail {

// Address space reserved once (no memory is committed until touched); allocations are page
// aligned and never reused, and freed pages are returned to the system. 256 GiB of addresses
// outlast any test run.
class arena {
public:
    static arena& get() {
        static arena a;
        return a;
    }
    void* allocate(std::size_t bytes) {
        const std::size_t n = round_up(bytes ? bytes : 1);
        std::lock_guard<std::mutex> lock(m_);
        if (used_ + n > reserved)
            throw locost::error("emulated.out_of_memory",
                                "emulated device: the test arena's " + std::to_string(reserved >> 30) + " GiB of addresses are used up");
        void* p = base_ + used_;
        used_ += n;
        live_ += bytes;
        peak_ = std::max(peak_, live_);
        if (open_ > 0) protect(p, n, PROT_READ | PROT_WRITE);
        return p;
    }
    void free(void* p, std::size_t bytes) noexcept {
        if (!p) return;
        madvise(p, round_up(bytes ? bytes : 1), MADV_DONTNEED);  // the pages read as zeros if ever opened again
        std::lock_guard<std::mutex> lock(m_);
        live_ -= bytes;
    }
    // Bytes the model holds on the device (as requested, before page rounding), and the most it
    // held since reset_peak(): what a GPU would hold in tensors, for the memory estimate's test.
    std::size_t live() {
        std::lock_guard<std::mutex> lock(m_);
        return live_;
    }
    std::size_t peak() {
        std::lock_guard<std::mutex> lock(m_);
        return peak_;
    }
    void reset_peak() {
        std::lock_guard<std::mutex> lock(m_);
        peak_ = live_;
    }
    // While any kernel or transfer runs, the arena is readable and writable; otherwise not.
    void open() {
        std::lock_guard<std::mutex> lock(m_);
        if (open_++ == 0) protect(base_, used_, PROT_READ | PROT_WRITE);
    }
    void close() noexcept {
        std::lock_guard<std::mutex> lock(m_);
        if (--open_ == 0) protect(base_, used_, PROT_NONE);
    }
    bool contains(const void* p) const noexcept {
        const auto* c = static_cast<const std::byte*>(p);
        return c >= base_ && c < base_ + reserved;
    }

private:
    static constexpr std::size_t reserved = std::size_t{256} << 30;
    std::size_t live_ = 0, peak_ = 0;
    arena() {
        void* p = mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) throw locost::error("emulated.out_of_memory", "emulated device: cannot reserve the test arena");
        base_ = static_cast<std::byte*>(p);
        install_fault_handler();
    }
    static std::size_t round_up(std::size_t n) {
        const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
        return (n + page - 1) / page * page;
    }
    static void protect(void* p, std::size_t n, int prot) noexcept {
        if (n) mprotect(p, n, prot);
    }
    // A fault inside the arena is host code touching device memory: say so, then fault again
    // with the default action so the test run stops there.
    static void on_fault(int sig, siginfo_t* info, void*) {
        if (get().contains(info->si_addr)) {
            static const char msg[] = "\nemulated device: host code dereferenced backend memory (a step a GPU backend cannot run); "
                                      "run the test under gdb to see the line\n";
            [[maybe_unused]] auto r = write(2, msg, sizeof msg - 1);
        }
        signal(sig, SIG_DFL);
    }
    static void install_fault_handler() {
        struct sigaction sa {};
        sa.sa_sigaction = on_fault;
        sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, nullptr);
    }

    std::byte* base_ = nullptr;
    std::size_t used_ = 0;
    int open_ = 0;
    std::mutex m_;
};

// The arena is open for the lifetime of one of these.
struct open_scope {
    open_scope() { arena::get().open(); }
    ~open_scope() { arena::get().close(); }
    open_scope(const open_scope&) = delete;
    open_scope& operator=(const open_scope&) = delete;
};

struct deleter {
    std::size_t bytes = 0;
    void operator()(void* p) const noexcept { arena::get().free(p, bytes); }
};

// A kernel's pointer arguments must point into the arena (or be null): a host pointer that
// reaches a device kernel is the other half of what a GPU cannot run.
inline void check_device(const void* p, const char* op, const char* what) {
    if (p && !arena::get().contains(p)) {
        int status = 0;
        std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(op, nullptr, nullptr, &status), std::free);
        throw locost::error("emulated.host_pointer",
                            std::string("emulated device: ") + (status == 0 ? name.get() : op) + " was given a host pointer (" + what +
                                ")");
    }
}
template <class S>
void check_argument(const std::vector<locost::ops::attention_problem<S>>& problems, const char* op) {
    for (const auto& p : problems) {
        check_device(p.q, op, "q");
        check_device(p.out, op, "out");
        check_device(p.bias, op, "bias");
        check_device(p.bias2, op, "bias2");
        check_device(p.key_bias, op, "key_bias");
        for (const auto* m : {&p.k, &p.v, &p.k2, &p.v2}) {
            check_device(m->data, op, "keys/values");
            check_device(m->scale, op, "keys/values scale");
        }
    }
}
inline void check_argument(const locost::ops::kv_matrix& m, const char* op) {
    check_device(m.data, op, "keys/values");
    check_device(m.scale, op, "keys/values scale");
}
inline void check_argument(const locost::ops::weight_view& w, const char* op) {
    check_device(w.data, op, "weights");
    check_device(w.scale, op, "weight scales");
}
template <class A>
void check_argument(const A& a, const char* op) {
    if constexpr (std::is_pointer_v<A>) {
        using E = std::remove_cv_t<std::remove_pointer_t<A>>;
        if constexpr (std::is_arithmetic_v<E> || std::is_void_v<E>) check_device(a, op, "a buffer");
    }
}

}  // namespace emulated_detail
}  // namespace test

namespace locost {

template <>
inline constexpr bool is_backend<test::emulated> = true;

template <>
struct memory<test::emulated> {
    template <class T>
    struct pointer : std::unique_ptr<T[], test::emulated_detail::deleter> {
        using std::unique_ptr<T[], test::emulated_detail::deleter>::unique_ptr;
    };
    template <class T>
    static pointer<T> allocate(std::size_t n) {
        const std::size_t bytes = n * sizeof(T);
        return pointer<T>(static_cast<T*>(test::emulated_detail::arena::get().allocate(bytes)), test::emulated_detail::deleter{bytes});
    }
};

template <>
struct transfer<test::emulated> {
    template <class T>
    static void upload(T* dst, const T* src, std::size_t n) {
        copy(dst, src, n);
    }
    template <class T>
    static void download(T* dst, const T* src, std::size_t n) {
        copy(dst, src, n);
    }
    template <class T>
    static void copy(T* dst, const T* src, std::size_t n) {
        test::emulated_detail::open_scope open;
        if (n) std::memmove(dst, src, n * sizeof(T));
    }
    template <class T>
    static void copy_2d(T* dst, locost::index_t dst_pitch, const T* src, locost::index_t src_pitch, locost::index_t width,
                        locost::index_t rows) {
        test::emulated_detail::open_scope open;
        for (locost::index_t r = 0; r < rows; ++r)
            std::memmove(dst + r * dst_pitch, src + r * src_pitch, static_cast<std::size_t>(width) * sizeof(T));
    }
};

// Every op is the CPU's kernel, run with the arena open, after its pointers are checked. The S4D
// kernel ops are exempt: the CPU convolution they serve calls them with its own host buffers,
// where the CUDA convolution passes device ones.
template <class Op, class Scalar>
struct kernel<Op, test::emulated, Scalar> {
    // The S4D kernel source reports no support, as on a GPU (ops::kernel_groups_stop_at_support).
    static constexpr bool stops_at_support = false;
    template <auto... Params, class... Args>
    static void run(Args&&... args) {
        if constexpr (!std::is_same_v<Op, ops::ssm_kernels_op> && !std::is_same_v<Op, ops::ssm_kernel_group_op>)
            (test::emulated_detail::check_argument(std::as_const(args), typeid(Op).name()), ...);
        test::emulated_detail::open_scope open;
        if constexpr (sizeof...(Params) == 0) kernel<Op, cpu, Scalar>::run(std::forward<Args>(args)...);
        else kernel<Op, cpu, Scalar>::template run<Params...>(std::forward<Args>(args)...);
    }
};

}  // namespace locost
