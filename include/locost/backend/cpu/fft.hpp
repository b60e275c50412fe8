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

#include "../../core/aligned.hpp"
#include "../../ops/fft.hpp"

namespace locost {

namespace cpu_detail {

template <class T>
struct fftw;

template <>
struct fftw<float> {
    using plan = fftwf_plan;
    using cpx = fftwf_complex;
    static plan r2c(int n, int howmany, float* in, cpx* out) {
        return fftwf_plan_many_dft_r2c(1, &n, howmany, in, nullptr, 1, n, out, nullptr, 1, n / 2 + 1, FFTW_ESTIMATE);
    }
    static plan c2r(int n, int howmany, cpx* in, float* out) {
        return fftwf_plan_many_dft_c2r(1, &n, howmany, in, nullptr, 1, n / 2 + 1, out, nullptr, 1, n, FFTW_ESTIMATE);
    }
    static void exec_r2c(plan p, float* in, cpx* out) { fftwf_execute_dft_r2c(p, in, out); }
    static void exec_c2r(plan p, cpx* in, float* out) { fftwf_execute_dft_c2r(p, in, out); }
    static void destroy(plan p) { fftwf_destroy_plan(p); }
};

template <>
struct fftw<double> {
    using plan = fftw_plan;
    using cpx = fftw_complex;
    static plan r2c(int n, int howmany, double* in, cpx* out) {
        return fftw_plan_many_dft_r2c(1, &n, howmany, in, nullptr, 1, n, out, nullptr, 1, n / 2 + 1, FFTW_ESTIMATE);
    }
    static plan c2r(int n, int howmany, cpx* in, double* out) {
        return fftw_plan_many_dft_c2r(1, &n, howmany, in, nullptr, 1, n / 2 + 1, out, nullptr, 1, n, FFTW_ESTIMATE);
    }
    static void exec_r2c(plan p, double* in, cpx* out) { fftw_execute_dft_r2c(p, in, out); }
    static void exec_c2r(plan p, cpx* in, double* out) { fftw_execute_dft_c2r(p, in, out); }
    static void destroy(plan p) { fftw_destroy_plan(p); }
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

} // namespace cpu_detail

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

} // namespace locost
