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
// and reports progress to `progress`:
//   a callable   (phase, done, total) at every report
//   True         a bar per phase (tqdm.auto: a widget in Jupyter, text on a terminal), or lines
//                on Python's sys.stderr without tqdm
//   None         the same bars once the call has run `quiet_for` in an interactive session (a
//                terminal on stderr, or a Jupyter kernel): long work shows itself, short calls
//                and batch jobs stay silent
//   False        nothing
// Each phase (encoding, the cross-attention cache, SLED's chunks, decoding) has its own bar, in its
// own units, with tqdm's time left; a phase that ends closes its bar at its total.
class python_callbacks {
public:
    explicit python_callbacks(py::object progress) : started_(clock::now()) {
        if (progress.is_none()) {
            auto_ = interactive();
            show_ = false;
        } else if (py::isinstance<py::bool_>(progress)) {
            show_ = progress.cast<bool>();
        } else {
            callable_ = std::move(progress);
        }
    }
    python_callbacks(const python_callbacks&) = delete;
    python_callbacks& operator=(const python_callbacks&) = delete;
    ~python_callbacks() {
        if (!bar_.is_none()) {
            py::gil_scoped_acquire gil;
            close_bar(false);
        }
    }

    // From compute code without the GIL: every `period`, or always when `force`.
    void poll(const char* phase, double done, double total, bool force = false) {
        phase_ = phase;
        done_ = done;
        total_ = total;
        const auto now = clock::now();
        // (A phase's first report always goes out: a phase may be over within one period.)
        const bool new_phase = !last_phase_ || std::strcmp(last_phase_, phase) != 0;
        if (!force && !new_phase && now - last_ < period) return;
        last_phase_ = phase;
        reported_ = done;
        last_ = now;
        py::gil_scoped_acquire gil;
        if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        if (!callable_.is_none()) {
            callable_(phase, done, total);
            return;
        }
        if (auto_ && !show_ && now - started_ >= quiet_for) show_ = true;
        if (show_) show(phase, done, total);
    }
    // The last phase's end, when the rate limit held it back (a callback sees done == total).
    void finish() {
        if (phase_ && reported_ < total_) poll(phase_, total_, total_, true);
    }

    // Progress of an encode: "encoding" in layers (SLED: "encoding (SLED chunks)" in chunks), then
    // "cross-attention cache" from 0 to 1, each phase on its own scale.
    models::progress_callback encode_callback() {
        return [this](const models::encode_progress& e) {
            const double total = static_cast<double>(std::max<index_t>(e.tokens, 1));
            if (e.chunks > 0) poll("encoding (SLED chunks)", static_cast<double>(e.chunk), static_cast<double>(e.chunks));
            else if (e.cross_cache) poll("cross-attention cache", static_cast<double>(e.tokens_done) / total, 1.0);
            else poll("encoding", static_cast<double>(e.layer) + static_cast<double>(e.tokens_done) / total, static_cast<double>(e.layers));
        };
    }

    static constexpr auto period = std::chrono::milliseconds(50);

    static constexpr auto quiet_for = std::chrono::seconds(2);

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

    // A person is watching: stderr is a terminal, or a Jupyter kernel runs us.
    static bool interactive() {
        try {
            const py::module_ sys = py::module_::import("sys");
            if (sys.attr("modules").contains("ipykernel")) return true;
            const py::object err = sys.attr("stderr");
            return !err.is_none() && py::hasattr(err, "isatty") && err.attr("isatty")().cast<bool>();
        } catch (const py::error_already_set&) { return false; }
    }

    // (With the GIL.) The phase's bar, a new one when the phase changed.
    void show(const char* phase, double done, double total) {
        if (bar_phase_ != phase) {
            close_bar(true);
            if (lines_ && !bar_phase_.empty()) write_line(bar_phase_.c_str(), 100.0);  // the phase before ended
            bar_phase_ = phase;
            if (!lines_) {
                try {
                    bar_ = py::module_::import("tqdm.auto")
                               .attr("tqdm")(py::arg("total") = total, py::arg("desc") = phase, py::arg("leave") = true,
                                             py::arg("bar_format") = "{desc}: {percentage:3.0f}%|{bar}| {elapsed}<{remaining}");
                    bar_total_ = total;
                } catch (const py::error_already_set&) {
                    lines_ = true;  // no tqdm: lines on Python's stderr (what a notebook shows)
                }
            }
        }
        const double pct = total > 0 ? 100.0 * done / total : 100.0;
        if (lines_) {
            write_line(phase, pct);
            return;
        }
        if (total != bar_total_) {
            bar_.attr("total") = total;
            bar_total_ = total;
        }
        bar_.attr("n") = done;
        bar_.attr("refresh")();
    }
    // (With the GIL.) A line on Python's sys.stderr, as the tool's --progress writes them.
    static void write_line(const char* phase, double pct) {
        char line[160];
        std::snprintf(line, sizeof line, "locost: %s %5.1f%%\n", phase, pct);
        try {
            py::module_::import("sys").attr("stderr").attr("write")(line);
        } catch (const py::error_already_set&) { PyErr_Clear(); }
    }
    // (With the GIL.) Closes the bar, at its total when its phase ended.
    void close_bar(bool phase_ended) {
        if (bar_.is_none()) return;
        try {
            if (phase_ended) bar_.attr("n") = bar_total_;
            bar_.attr("close")();
        } catch (const py::error_already_set&) {}
        bar_ = py::none();
    }

    py::object callable_ = py::none(), bar_ = py::none();
    bool auto_ = false, show_ = false, lines_ = false;
    std::string bar_phase_;
    double bar_total_ = 0;
    clock::time_point started_, last_{}, last_signal_ = clock::now();
    const char* phase_ = nullptr;
    const char* last_phase_ = nullptr;  // of the last report
    double done_ = 0, total_ = 0, reported_ = -1;
    interrupt_check signals_{[this] { check_signals(); }};  // on the thread that computes: the one that made this
};

// Timings of the last call, for result objects.
struct timings {
    double encode_s = 0, decode_s = 0;
};

}  // namespace locost::python
