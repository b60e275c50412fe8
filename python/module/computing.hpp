// Computing without the GIL with signals kept off the computing threads, and the callbacks
// (progress, Ctrl-C) a computation makes into Python.
#pragma once
#include "common.hpp"

namespace locost::python {

// ---- computing without the GIL, signals kept off the computing threads -----------------------

// A thread that never blocks the asynchronous signals and does nothing else: while a call
// computes under a signal_shield, the kernel delivers Ctrl-C to it, Python's C handler notes it
// there, and the computing thread sees the note at its next progress point
// (PyErr_CheckSignals). Started once per process (again in a forked child), with the mask of the
// first thread that computes.
inline void start_signal_receiver() {
    static std::mutex mu;
    static pid_t started_in = 0;
    std::lock_guard<std::mutex> lock(mu);
    if (started_in == ::getpid()) return;
    std::thread([] {
        pthread_setname_np(pthread_self(), "locost-signals");
        for (;;) ::pause();
    }).detach();
    started_in = ::getpid();
}

// What every computation runs under: the GIL released, asynchronous signals blocked on this
// thread and its OpenMP pool (signal_shield.hpp says why), the receiver thread standing in.
class computing {
    bool receiver_ = (start_signal_receiver(), true);  // first: it must start unblocked
    py::gil_scoped_release nogil_;
    signal_shield shield_;
};

// ---- callbacks: progress, Ctrl-C ------------------------------------------------------------

// Calls back into Python at most every `period` while the GIL is released: checks for signals
// (Ctrl-C raises KeyboardInterrupt out of the computation, which unwinds and frees what it held)
// and reports progress to `progress` (a callable taking (phase, done, total), True for a tqdm bar
// or, without tqdm, lines on stderr, or None).
class python_callbacks {
public:
    explicit python_callbacks(py::object progress) {
        if (progress.is_none() || (py::isinstance<py::bool_>(progress) && !progress.cast<bool>())) return;
        if (py::isinstance<py::bool_>(progress)) {
            try {
                bar_ = py::module_::import("tqdm").attr("tqdm")(py::arg("total") = 100, py::arg("unit") = "%",
                                                                py::arg("bar_format") = "{desc}: {percentage:3.0f}%|{bar}| {elapsed}");
            } catch (const py::error_already_set&) {
                lines_ = true;  // no tqdm: lines on stderr, as the tool's --progress
            }
        } else {
            callable_ = std::move(progress);
        }
    }
    python_callbacks(const python_callbacks&) = delete;
    python_callbacks& operator=(const python_callbacks&) = delete;
    ~python_callbacks() {
        if (!bar_.is_none()) {
            py::gil_scoped_acquire gil;
            try {
                bar_.attr("close")();
            } catch (const py::error_already_set&) {}
            bar_ = py::none();
        }
    }

    // From compute code without the GIL: every `period`, or always when `force`.
    void poll(const char* phase, double done, double total, bool force = false) {
        phase_ = phase;
        done_ = done;
        total_ = total;
        const auto now = clock::now();
        if (!force && now - last_ < period) return;
        reported_ = done;
        last_ = now;
        py::gil_scoped_acquire gil;
        if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        if (!callable_.is_none()) callable_(phase, done, total);
        else if (!bar_.is_none()) {
            const double pct = total > 0 ? 100.0 * done / total : 100.0;
            bar_.attr("set_description_str")(phase);
            bar_.attr("n") = pct;
            bar_.attr("refresh")();
        } else if (lines_) {
            std::fprintf(stderr, "locost: %s %5.1f%%\n", phase, total > 0 ? 100.0 * done / total : 100.0);
        }
    }

    // The last phase's end, when the rate limit held it back (a callback sees done == total).
    void finish() {
        if (phase_ && reported_ < total_) poll(phase_, total_, total_, true);
    }

    // Progress of an encode in layers (SLED: chunks); with_cache: a cross-attention cache is
    // built after the last layer, counted as one more.
    models::progress_callback encode_callback(bool with_cache = true) {
        return [this, with_cache](const models::encode_progress& e) {
            const double total = static_cast<double>(std::max<index_t>(e.tokens, 1));
            const double layers = static_cast<double>(e.layers + (with_cache ? 1 : 0));
            if (e.chunks > 0) poll("encoding (SLED chunks)", static_cast<double>(e.chunk), static_cast<double>(e.chunks));
            else if (e.cross_cache)
                poll("cross-attention cache", static_cast<double>(e.layers) + static_cast<double>(e.tokens_done) / total, layers);
            else poll("encoding", static_cast<double>(e.layer) + static_cast<double>(e.tokens_done) / total, layers);
        };
    }

    static constexpr auto period = std::chrono::milliseconds(50);

private:
    // The interrupt_check the library runs between pieces of work inside a layer: Ctrl-C is
    // seen within `period` plus one piece, not only at the next layer.
    void check_signals() {
        const auto now = clock::now();
        if (now - last_signal_ < period) return;
        last_signal_ = now;
        py::gil_scoped_acquire gil;
        if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }

    py::object callable_ = py::none(), bar_ = py::none();
    bool lines_ = false;
    clock::time_point last_{}, last_signal_ = clock::now();
    const char* phase_ = nullptr;
    double done_ = 0, total_ = 0, reported_ = -1;
    interrupt_check signals_{[this] { check_signals(); }};  // on the thread that computes: the one that made this
};

// Timings of the last call, for result objects.
struct timings {
    double encode_s = 0, decode_s = 0;
};

}  // namespace locost::python
