// FFTW behind the rfft/irfft ops, with a process-wide plan cache.
//
// Design: plans are made once per (precision, direction, size, batch) with FFTW_ESTIMATE (the
// convolution is < 1 % of an encoder pass, so measuring plans is not worth seconds of start-up)
// and executed with FFTW's new-array interface, which is thread-safe; only planning is
// serialised by a mutex (FFTW's planner is not thread-safe). Every buffer handed to a plan comes
// from our 64-byte aligned allocator, so all arrays share the alignment the plan was made for.
// Plans live until the process exits. Scaling: none (FFTW convention); callers divide by n.
#pragma once
#include <fftw3.h>

#include <complex>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>

#include "../../core/aligned.hpp"
#include "../../ops/fft.hpp"

namespace locost {

namespace cpu_detail {

// FFTW's entry points of one precision (fftwf_* for float, fftw_* for double): the two APIs take
// the same arguments under different prefixes, so the plan layout is written once, below.
template <class R2C, class C2R, class ExecR2C, class ExecC2R, class Destroy>
struct fftw_api {
    R2C plan_r2c;
    C2R plan_c2r;
    ExecR2C exec_r2c;
    ExecC2R exec_c2r;
    Destroy destroy;
};
// (Deduced from the five entry points: clang before 17 deduces no aggregate's arguments by itself.)
template <class R2C, class C2R, class ExecR2C, class ExecC2R, class Destroy>
fftw_api(R2C, C2R, ExecR2C, ExecC2R, Destroy) -> fftw_api<R2C, C2R, ExecR2C, ExecC2R, Destroy>;

template <class T>
struct fftw {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "FFTW transforms float or double");
    static constexpr bool single = std::is_same_v<T, float>;
    using plan = std::conditional_t<single, fftwf_plan, fftw_plan>;
    using cpx = std::conditional_t<single, fftwf_complex, fftw_complex>;
    // (Inside a template, the other precision's branch is not instantiated: a float-only program
    // refers to no fftw_* function.)
    static constexpr auto api() {
        if constexpr (single)
            return fftw_api{fftwf_plan_many_dft_r2c, fftwf_plan_many_dft_c2r, fftwf_execute_dft_r2c, fftwf_execute_dft_c2r,
                            fftwf_destroy_plan};
        else return fftw_api{fftw_plan_many_dft_r2c, fftw_plan_many_dft_c2r, fftw_execute_dft_r2c, fftw_execute_dft_c2r, fftw_destroy_plan};
    }
    // howmany transforms side by side, each of n reals and n/2 + 1 complex values.
    static plan r2c(int n, int howmany, T* in, cpx* out) {
        return api().plan_r2c(1, &n, howmany, in, nullptr, 1, n, out, nullptr, 1, n / 2 + 1, FFTW_ESTIMATE);
    }
    static plan c2r(int n, int howmany, cpx* in, T* out) {
        return api().plan_c2r(1, &n, howmany, in, nullptr, 1, n / 2 + 1, out, nullptr, 1, n, FFTW_ESTIMATE);
    }
    static void exec_r2c(plan p, T* in, cpx* out) { api().exec_r2c(p, in, out); }
    static void exec_c2r(plan p, cpx* in, T* out) { api().exec_c2r(p, in, out); }
    static void destroy(plan p) { api().destroy(p); }
};

// One cache per precision. Key: (forward?, n, howmany).
template <class T>
class fft_plans {
public:
    using F = fftw<T>;
    static fft_plans& instance() {
        static fft_plans cache;
        return cache;
    }
    typename F::plan get(bool forward, index_t n, index_t howmany) {
        const std::lock_guard<std::mutex> lock(mutex_);
        const auto key = std::make_tuple(forward, n, howmany);
        if (auto it = plans_.find(key); it != plans_.end()) return it->second;
        // FFTW_ESTIMATE does not touch the arrays; they only fix the alignment and strides.
        auto re = aligned_alloc_n<T>(static_cast<std::size_t>(n * howmany));
        auto cx = aligned_alloc_n<typename F::cpx>(static_cast<std::size_t>((n / 2 + 1) * howmany));
        const int ni = static_cast<int>(n), hi = static_cast<int>(howmany);
        typename F::plan p = forward ? F::r2c(ni, hi, re.get(), cx.get()) : F::c2r(ni, hi, cx.get(), re.get());
        if (!p) throw error("fft.plan_failed", "FFTW could not plan a transform of size " + std::to_string(n));
        plans_.emplace(key, p);
        return p;
    }
    fft_plans(const fft_plans&) = delete;
    fft_plans& operator=(const fft_plans&) = delete;

private:
    fft_plans() = default;
    ~fft_plans() {
        for (auto& [k, p] : plans_) F::destroy(p);
    }
    std::mutex mutex_;
    std::map<std::tuple<bool, index_t, index_t>, typename F::plan> plans_;
};

}  // namespace cpu_detail

template <class T>
struct kernel<ops::rfft_op, cpu, T> {
    static void run(const T* in, std::complex<T>* out, index_t n, index_t howmany) {
        using F = cpu_detail::fftw<T>;
        auto plan = cpu_detail::fft_plans<T>::instance().get(true, n, howmany);
        // r2c does not modify its input; FFTW's signature is simply not const-correct.
        F::exec_r2c(plan, const_cast<T*>(in), reinterpret_cast<typename F::cpx*>(out));
    }
};

template <class T>
struct kernel<ops::irfft_op, cpu, T> {
    static void run(std::complex<T>* in, T* out, index_t n, index_t howmany) {
        using F = cpu_detail::fftw<T>;
        auto plan = cpu_detail::fft_plans<T>::instance().get(false, n, howmany);
        F::exec_c2r(plan, reinterpret_cast<typename F::cpx*>(in), out);
    }
};

}  // namespace locost
