// locost's Python module (`import locost`): the library's models, generation and tokenizers
// behind a Python API, built from the same headers as the tool.
//
// Options arrive as keyword arguments under transformers' names (max_new_tokens, num_beams, ...)
// and are read by the tool's own option readers (tools/locost/gen_flags.hpp, budget.hpp,
// input.hpp): `max_new_tokens=64` is `--max-new-tokens 64`. So a checkpoint resolves, a default
// comes from generation_config.json and a bad value is refused exactly as with `locost`, with the
// same error ids and messages.
//
// Every call releases the GIL while it computes; callbacks (progress, streaming) take it back
// briefly, and check for signals there, so that Ctrl-C interrupts a long encode or decode. Calls
// on one Model are serialized by its lock (a model's scratch is not shared between threads);
// two Models run side by side.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <locost/args.hpp>
#include <locost/budget.hpp>
#include <locost/device.hpp>
#include <locost/gen_flags.hpp>
#include <locost/input.hpp>
#include <locost/progress.hpp>
#include <locost/backend/cpu/signal_shield.hpp>
#include <locost/io/printable.hpp>

#include "device_model.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace py = pybind11;

namespace locost::python {

using clock = std::chrono::steady_clock;

// ---- keyword arguments → the tool's options ------------------------------------------------

// The options a call accepts, as the tool spells them.
struct option_names {
    std::set<std::string> valued, flags;
};

inline const option_names& generation_option_names() {
    static const option_names n{cli::joined({cli::generation_valued}), {"do-sample"}};
    return n;
}

// kwargs → the tool's `args` for `command`, on top of `base` (the model's own options). Names take
// underscores (max_new_tokens); None means "not given". Error: python.unknown_argument naming the
// argument and the ones the call takes.
// A Python str as UTF-8, or python.bad_argument naming `what`: not a str says what it got; a lone
// surrogate (no UTF-8 holds one) says where it is, instead of the bare RuntimeError a conversion
// gave; a path (`path`) may not hold a NUL character, which C's file calls would cut it at.
inline std::string utf8_of(const py::handle& v, const std::string& what, bool path = false) {
    if (!py::isinstance<py::str>(v)) throw error("python.bad_argument", what + " expects a str, got " + py::repr(v).cast<std::string>());
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(v.ptr(), &n);
    if (!s) {
        PyErr_Clear();
        Py_ssize_t at = 0;
        const Py_ssize_t len = PyUnicode_GetLength(v.ptr());
        while (at < len) {
            const Py_UCS4 c = PyUnicode_ReadChar(v.ptr(), at);
            if (c >= 0xD800 && c <= 0xDFFF) break;
            ++at;
        }
        throw error("python.bad_argument", what + ": the text holds a lone surrogate at index " + std::to_string(at) +
                                               " (U+D800..U+DFFF alone is not Unicode text; decode bytes with errors='replace')");
    }
    std::string out(s, static_cast<std::size_t>(n));
    if (path) {
        if (const auto nul = out.find('\0'); nul != std::string::npos)
            throw error("python.bad_argument", what + ": the path holds a NUL character at byte " + std::to_string(nul));
    }
    return out;
}

class option_builder {
public:
    option_builder(std::string command, const option_names& names) : command_(std::move(command)), names_(&names) {}

    void add(const std::string& python_name, const py::handle& value) {
        if (value.is_none()) return;
        std::string flag = python_name;
        for (auto& c : flag)
            if (c == '_') c = '-';
        if (names_->flags.count(flag)) {
            if (!py::isinstance<py::bool_>(value))
                throw error("python.bad_argument", command_ + ": argument '" + python_name + "' expects True or False, got " + repr(value));
            if (value.cast<bool>()) argv_.push_back("--" + flag);
            return;
        }
        if (!names_->valued.count(flag)) {
            std::string known;
            for (const auto& set : {names_->valued, names_->flags})
                for (auto n : set) {
                    for (auto& c : n)
                        if (c == '-') c = '_';
                    known += (known.empty() ? "" : ", ") + n;
                }
            throw error("python.unknown_argument", command_ + ": unknown argument '" + python_name + "' (it takes: " + known + ")");
        }
        argv_.push_back("--" + flag);
        argv_.push_back(text_of(python_name, value));
    }
    void add_raw(const std::string& flag, const std::string& value) {
        argv_.push_back("--" + flag);
        argv_.push_back(value);
    }
    void add_flag(const std::string& flag) { argv_.push_back("--" + flag); }

    cli::args build() const {
        std::vector<char*> argv;
        for (const auto& s : argv_) argv.push_back(const_cast<char*>(s.c_str()));
        const std::set<std::string>& valued = names_->valued; const std::set<std::string>& flags = names_->flags;
        return cli::args(command_, static_cast<int>(argv.size()), argv.data(), 0, valued, flags);
    }

private:
    static std::string repr(const py::handle& v) { return py::repr(v).cast<std::string>(); }
    // A value as the tool's flag reads it: booleans as true/false, lists as JSON, the rest as str().
    std::string text_of(const std::string& name, const py::handle& v) const {
        if (py::isinstance<py::bool_>(v)) return v.cast<bool>() ? "true" : "false";
        if (py::isinstance<py::str>(v)) return utf8_of(v, command_ + ": argument '" + name + "'");
        if (py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v)) return py::str(v).cast<std::string>();
        if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
            std::string json;
            list_json(name, v, v, 0, json);
            return json;
        }
        throw error("python.bad_argument", command_ + ": argument '" + name + "' expects a number, a string or a list, got " + locost::io::detail::printable(repr(v), 200));
    }

    // A list (of lists) of numbers as JSON for the tool's reader, which checks the values; any other
    // element (a str, bytes, None, an object json.dumps would have refused with a TypeError) is
    // python.bad_argument naming the argument and the element.
    void list_json(const std::string& name, const py::handle& whole, const py::handle& v, int depth, std::string& out) const {
        if ((py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) && depth < 2) {
            out += '[';
            bool first = true;
            for (const auto& item : v) {
                if (!first) out += ',';
                first = false;
                list_json(name, whole, item, depth + 1, out);
            }
            out += ']';
            return;
        }
        if (depth > 0 && !py::isinstance<py::bool_>(v) && (py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v))) {
            out += py::str(v).cast<std::string>();
            return;
        }
        throw error("python.bad_argument", command_ + ": argument '" + name + "' expects a list of ids or a list of lists of ids, got " +
                                               locost::io::detail::printable(repr(whole), 200) + " (an element " + locost::io::detail::printable(repr(v), 100) + ")");
    }

    std::string command_;
    const option_names* names_;
    std::vector<std::string> argv_;
};

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
            } catch (const py::error_already_set&) {
            }
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
            else
                poll("encoding", static_cast<double>(e.layer) + static_cast<double>(e.tokens_done) / total, layers);
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

// ---- result objects -------------------------------------------------------------------------

struct token_event {
    std::int64_t id = 0;
    std::string text;  // the text this token adds to the output (may be empty: a partial character, a special token)
    index_t step = 0;
    bool is_last = false;
};

struct summary {
    std::string text;
    std::vector<std::int64_t> ids;
    std::optional<double> score;  // beam search: the sequence score
    index_t input_tokens = 0, steps = 0;
    double encode_seconds = 0, decode_seconds = 0;
};

// ---- the model ------------------------------------------------------------------------------

// The batch's mask, or none when no row is padded (every row as long as the longest): the library
// then skips the mask's checks and scans, as a C++ caller passing nullptr does.
inline const float* mask_of(const cli::batch_input& in) {
    for (const auto& r : in.rows)
        if (static_cast<index_t>(r.size()) != in.L) return in.mask.data();
    return nullptr;
}

// A tensor handed to numpy without a copy: the array owns it through a capsule.
template <class T>
py::array_t<T> to_numpy(tensor<T>&& t) {
    auto* owner = new tensor<T>(std::move(t));
    py::capsule keep(owner, [](void* p) { delete static_cast<tensor<T>*>(p); });
    std::vector<py::ssize_t> shape;
    for (auto d : owner->shape()) shape.push_back(static_cast<py::ssize_t>(d));
    return py::array_t<T>(shape, owner->data(), keep);
}

// Rows of ids from a list of lists (ragged) or a 2-D numpy integer array. Error:
// python.bad_argument naming `what`.
inline std::vector<std::vector<std::int64_t>> id_rows(const py::handle& v, const std::string& what) {
    std::vector<std::vector<std::int64_t>> rows;
    if (py::isinstance<py::array>(v)) {
        const py::array a = py::reinterpret_borrow<py::array>(v);
        if (a.ndim() != 2 || (a.dtype().kind() != 'i' && a.dtype().kind() != 'u'))
            throw error("python.bad_argument", what + " expects a 2-D integer array (batch, length) or a list of lists of ids, got a " +
                                                   std::to_string(a.ndim()) + "-D array of dtype " + py::str(a.dtype()).cast<std::string>());
        const auto ids = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
        const auto r = ids.unchecked<2>();
        rows.assign(static_cast<std::size_t>(r.shape(0)), {});
        for (py::ssize_t b = 0; b < r.shape(0); ++b)
            for (py::ssize_t l = 0; l < r.shape(1); ++l) rows[static_cast<std::size_t>(b)].push_back(r(b, l));
        return rows;
    }
    if (!py::isinstance<py::sequence>(v) || py::isinstance<py::str>(v))
        throw error("python.bad_argument", what + " expects a list of lists of ids or a 2-D integer array, got " + py::repr(v).cast<std::string>());
    for (const auto& row : py::reinterpret_borrow<py::sequence>(v)) {
        if (!py::isinstance<py::sequence>(row) || py::isinstance<py::str>(row))
            throw error("python.bad_argument", what + " expects a list of lists of ids (one list per document), got an element " +
                                                   py::repr(row).cast<std::string>());
        std::vector<std::int64_t> r;
        for (const auto& id : py::reinterpret_borrow<py::sequence>(row)) {
            if (py::isinstance<py::bool_>(id) || py::isinstance<py::float_>(id) || !PyIndex_Check(id.ptr()))
                throw error("python.bad_argument", what + " expects integer ids, got " + py::repr(id).cast<std::string>());
            try {
                r.push_back(id.cast<std::int64_t>());
            } catch (const py::cast_error&) {
                throw error("python.bad_argument", what + " expects integer ids (64-bit), got " + py::repr(id).cast<std::string>());
            }
        }
        rows.push_back(std::move(r));
    }
    return rows;
}

class model {
public:
    model(const py::object& path_or_name, const py::object& device_arg, py::object threads, const py::object& weights_arg,
          const py::object& compute_arg, const py::object& cross_attention_arg, py::object memory_budget, py::object sled, py::kwargs extra) {
        const std::string device = utf8_of(device_arg, "Model: argument 'device'"), weights = utf8_of(weights_arg, "Model: argument 'weights'"),
                          compute = utf8_of(compute_arg, "Model: argument 'compute'"),
                          cross_attention = utf8_of(cross_attention_arg, "Model: argument 'cross_attention'");
        option_builder b("Model", model_option_names());
        // A str or an os.PathLike (pathlib.Path), as open() takes one.
        const bool path_like = !py::isinstance<py::str>(path_or_name) && py::hasattr(path_or_name, "__fspath__");
        const py::object path = path_like ? py::module_::import("os").attr("fspath")(path_or_name) : path_or_name;
        b.add_raw("model", utf8_of(path, "Model: argument 'path_or_name'", /*path=*/true));
        b.add_raw("device", device);
        b.add("threads", threads);
        b.add_raw("weights", weights);
        b.add_raw("compute", compute == "f32" ? "fp32" : compute);
        b.add_raw("cross-attention", cross_attention);
        if (!memory_budget.is_none()) b.add_raw("memory-budget", utf8_of(py::str(memory_budget), "Model: argument 'memory_budget'"));
        if (!sled.is_none()) {
            if (!py::isinstance<py::dict>(sled))
                throw error("python.bad_argument", "Model: argument 'sled' expects a dict such as dict(context=256, window_fraction=0.5), got " +
                                                       py::repr(sled).cast<std::string>());
            for (const auto& [k, v] : py::reinterpret_borrow<py::dict>(sled)) {
                const std::string key = utf8_of(py::str(k), "Model: a key of 'sled'");
                if (key == "context") b.add("sled_context", v);
                else if (key == "window_fraction") b.add("sled_window_fraction", v);
                else if (key == "encode_prefix") {
                    if (!v.cast<bool>()) b.add_flag("no-encode-prefix");
                } else
                    throw error("python.unknown_argument", "Model: sled has no setting '" + key + "' (it takes: context, window_fraction, encode_prefix)");
            }
        }
        for (const auto& [k, v] : extra) {
            const std::string key = utf8_of(py::str(k), "Model: an argument's name");
            if (key == "global_tokens" && (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v))) {
                std::string s;
                for (const auto& p : py::reinterpret_borrow<py::sequence>(v)) s += (s.empty() ? "" : ",") + utf8_of(py::str(p), "Model: 'global_tokens'");
                b.add_raw("global-tokens", s);
            } else {
                b.add(key, v);
            }
        }
        base_ = b;
        const cli::args a = b.build();
        device_ = cli::read_device(a, "Model");
        if (device_ != device_kind::cpu) cli::cuda_devices();
        {
            computing nogil;
            ck_ = std::make_unique<io::checkpoint>(cli::open_checkpoint(a));
            mo_ = cli::read_model_options(a, "Model", *ck_);
            threads_ = a.integer<int>("threads", 0, 0, 1024);
            cfg_ = models::read_config(*ck_);
            models::require_matching_weights(*ck_, *cfg_);
            sled_ = models::sled_settings(*ck_, mo_).has_value();
            if (a.has("memory-budget")) budget_ = cli::read_memory_budget(a, "Model", device_);
            // What the loaded model itself holds: the estimate of a one-token request. The default
            // budget of a request is the memory available then plus this (already resident).
            models::memory_request r;
            r.decoder = true;
            r.decoder_positions = 1;
            r.device = device_;
            resident_ = models::estimate_memory(*cfg_, mo_, r).peak();
            check_budget(r, "Model");
            if (device_ == device_kind::cuda) model_ = load_cuda_model(*ck_, mo_);
            else model_ = std::make_unique<backend_model<cpu>>(models::load_model<float, cpu>(*ck_, mo_));
            // The tokenizer now, so that a first summarize does not pay for reading it; a checkpoint
            // without one (or with a broken one) is still a model for ids, and text calls say why.
            try {
                tokenizer();
            } catch (const error&) {
            }
        }
    }

    static const option_names& model_option_names() {
        static const option_names n{cli::joined({cli::model_valued, cli::device_valued, cli::budget_valued, {"model", "tokenizer"}}), cli::model_flags};
        return n;
    }

    const models::model_config& config() const { return models::common(*cfg_); }
    std::string path() const { return ck_->dir(); }
    std::string family() const { return model_->family().name; }
    bool is_sled() const { return sled_; }

    text::tokenizer& tokenizer() {
        if (!tok_) tok_ = cli::open_tokenizer(base_.build(), *ck_, "Model");
        return *tok_;
    }

    // ---- calls ----

    py::object summarize(const py::object& texts, const py::object& prefix, bool details, index_t max_batch_tokens, py::object progress,
                         const py::kwargs& kw) {
        const bool one = py::isinstance<py::str>(texts);
        std::vector<std::string> docs;
        if (one) docs.push_back(utf8_of(texts, "summarize: the text"));
        else {
            if (!py::isinstance<py::sequence>(texts))
                throw error("python.bad_argument", "summarize: expects a text or a list of texts, got " + py::repr(texts).cast<std::string>());
            for (const auto& t : py::reinterpret_borrow<py::sequence>(texts)) {
                if (!py::isinstance<py::str>(t))
                    throw error("python.bad_argument", "summarize: expects a list of texts (str), got an element " + py::repr(t).cast<std::string>());
                docs.push_back(utf8_of(t, "summarize: text " + std::to_string(docs.size())));
            }
            if (docs.empty()) return py::list();
        }
        const cli::args a = call_args("summarize", kw);
        auto defaults = cli::read_generation_defaults(a, *ck_, "summarize");
        const auto go = cli::read_generation_options(a, "summarize", *cfg_, defaults.config);
        if (max_batch_tokens < 0) throw error("python.bad_argument", "summarize: max_batch_tokens must be 0 or more, got " + std::to_string(max_batch_tokens));
        const auto rows = text_rows(docs, prefix, defaults.prefix, "summarize");
        python_callbacks cb(std::move(progress));
        // One batch of every text, or (max_batch_tokens > 0) batches by length of at most that
        // many padded tokens (generation::length_batches); each text's result is its own run's.
        std::vector<index_t> lengths;
        for (const auto& r : rows.ids) lengths.push_back(static_cast<index_t>(r.size()));
        std::vector<std::vector<std::size_t>> groups;
        if (max_batch_tokens > 0) groups = generation::length_batches(lengths, max_batch_tokens);
        else {
            groups.emplace_back(docs.size());
            std::iota(groups.back().begin(), groups.back().end(), std::size_t{0});
        }
        struct doc_result {
            std::vector<std::vector<std::int64_t>> seqs;
            std::vector<double> scores;
            index_t steps = 0;
            timings t;
        };
        std::vector<doc_result> results(docs.size());
        {
            computing nogil;
            std::lock_guard<std::mutex> lock(mu_);
            if (sled_) model_->set_prefix_length(rows.prefix);  // a plain model reads the question as the rows' first ids
            threads_here();
            for (const auto& g : groups) {
                std::vector<std::vector<std::int64_t>> batch_rows;
                for (std::size_t d : g) batch_rows.push_back(rows.ids[d]);
                auto in = cli::make_batch(std::move(batch_rows), config().pad_token_id);
                in.encode_each = true;  // each text's summary is that of its own run
                auto request = cli::batch_request(in);
                cli::add_generation(request, a, go, defaults.source);
                check_budget(request, "summarize");
                timings t;
                const auto res = run(in, go, cb, t, {});
                const std::size_t per = res.sequences.size() / g.size();
                for (std::size_t k = 0; k < g.size(); ++k) {
                    auto& mine = results[g[k]];
                    for (std::size_t j = 0; j < per; ++j) {
                        mine.seqs.push_back(res.sequences[k * per + j]);
                        if (k * per + j < res.scores.size()) mine.scores.push_back(res.scores[k * per + j]);
                    }
                    mine.steps = res.steps;
                    mine.t = t;
                }
            }
        }
        py::list out;
        for (std::size_t d = 0; d < docs.size(); ++d) {
            py::list mine;
            const doc_result& dr = results[d];
            for (std::size_t k = 0; k < dr.seqs.size(); ++k) {
                const auto& s = dr.seqs[k];
                std::string text = decode(s);
                if (details) {
                    summary sm;
                    sm.text = std::move(text);
                    sm.ids = s;
                    if (k < dr.scores.size()) sm.score = dr.scores[k];
                    sm.input_tokens = static_cast<index_t>(rows.ids[d].size());
                    sm.steps = dr.steps;
                    sm.encode_seconds = dr.t.encode_s;
                    sm.decode_seconds = dr.t.decode_s;
                    mine.append(py::cast(std::move(sm)));
                } else {
                    mine.append(py::str(text));
                }
            }
            out.append(dr.seqs.size() == 1 ? mine[0] : py::object(mine));
        }
        return one ? py::object(out[0]) : py::object(out);
    }

    py::list generate(const py::object& ids, index_t prefix_length, py::object progress, const py::kwargs& kw) {
        const cli::args a = call_args("generate", kw);
        auto defaults = cli::read_generation_defaults(a, *ck_, "generate");
        const auto go = cli::read_generation_options(a, "generate", *cfg_, defaults.config);
        auto rows = id_rows(ids, "generate: ids");
        check_ids(rows, "generate: ids");
        python_callbacks cb(std::move(progress));
        timings t;
        const auto res = with_batch(
            std::move(rows), "generate", prefix_length, [&](models::memory_request& r, const cli::batch_input&) { cli::add_generation(r, a, go, defaults.source); },
            [&](const cli::batch_input& in) { return run(in, go, cb, t, {}); });
        return py::cast(res.sequences);
    }

    py::array_t<float> encode(const py::object& ids, index_t prefix_length, py::object progress) {
        auto rows = id_rows(ids, "encode: ids");
        check_ids(rows, "encode: ids");
        python_callbacks cb(std::move(progress));
        auto states = with_batch(std::move(rows), "encode", prefix_length, [](models::memory_request&, const cli::batch_input&) {},
                                 [&](const cli::batch_input& in) {
                                     auto out = model_->encoder_states(in.ids.data(), mask_of(in), in.B, in.L, cb.encode_callback(false));
                                     cb.finish();
                                     return out;
                                 });
        return to_numpy(std::move(states));
    }

    py::array_t<float> score(const py::object& ids, const py::object& decoder_ids, index_t prefix_length, py::object progress) {
        auto rows = id_rows(ids, "score: ids");
        check_ids(rows, "score: ids");
        auto dec = id_rows(decoder_ids, "score: decoder_ids");
        check_ids(dec, "score: decoder_ids");
        if (dec.size() != rows.size())
            throw error("cli.bad_value", "score: decoder_ids has " + std::to_string(dec.size()) + " rows for " + std::to_string(rows.size()) + " rows of ids");
        const index_t T = dec.empty() ? 0 : static_cast<index_t>(dec[0].size());
        std::vector<std::int64_t> flat;
        for (std::size_t r = 0; r < dec.size(); ++r) {
            if (static_cast<index_t>(dec[r].size()) != T)
                throw error("cli.bad_value", "score: decoder_ids row " + std::to_string(r) + " has " + std::to_string(dec[r].size()) +
                                                 " ids, row 0 has " + std::to_string(T) + " (rows must have equal lengths)");
            flat.insert(flat.end(), dec[r].begin(), dec[r].end());
        }
        python_callbacks cb(std::move(progress));
        auto logits = with_batch(
            std::move(rows), "score", prefix_length,
            [&](models::memory_request& r, const cli::batch_input&) {
                r.decoder = r.teacher_forcing = true;
                r.decoder_positions = T;
            },
            [&](const cli::batch_input& in) {
                auto out = model_->score(in.ids.data(), mask_of(in), in.B, in.L, flat.data(), T, cb.encode_callback());
                cb.finish();
                return out;
            });
        return to_numpy(std::move(logits));
    }

    // The memory estimate of a request, per phase (what --dry-run prints).
    py::dict estimate(const py::object& input, py::object length, py::object batch_arg, const py::kwargs& kw) {
        const cli::args a = call_args("estimate", kw);
        auto defaults = cli::read_generation_defaults(a, *ck_, "estimate");
        const auto go = cli::read_generation_options(a, "estimate", *cfg_, defaults.config);
        models::memory_request request;
        if (!input.is_none()) {
            std::vector<std::vector<std::int64_t>> rows;
            if (py::isinstance<py::str>(input) || (py::isinstance<py::sequence>(input) && !py::isinstance<py::array>(input) &&
                                                   py::len(input) > 0 && py::isinstance<py::str>(input[py::int_(0)]))) {
                std::vector<std::string> docs;
                if (py::isinstance<py::str>(input)) docs.push_back(utf8_of(input, "estimate: the text"));
                else
                    for (const auto& t : py::reinterpret_borrow<py::sequence>(input))
                        docs.push_back(utf8_of(t, "estimate: text " + std::to_string(docs.size())));
                rows = text_rows(docs, py::none(), defaults.prefix, "estimate").ids;
            } else {
                rows = id_rows(input, "estimate: input");
            }
            request = cli::batch_request(cli::make_batch(rows, config().pad_token_id, "estimate: input"));
        } else {
            // A shape alone: estimated without making the input (length=3e11 asks for numbers, not
            // for the 2.4 TB a batch of that many ids would take).
            if (length.is_none()) throw error("python.bad_argument", "estimate: give the input (a text, texts or ids) or length=N");
            constexpr index_t most = index_t{1} << 40;
            // An int, or a float with an integer value (length=3e8), in [1, 2^40].
            auto whole = [&](const py::object& v, const char* name) {
                auto refuse = [&] {
                    throw error("python.bad_argument", std::string("estimate: argument '") + name + "' expects an integer in [1, " +
                                                           std::to_string(most) + "], got " + py::repr(v).cast<std::string>());
                };
                if (py::isinstance<py::bool_>(v)) refuse();
                if (py::isinstance<py::float_>(v)) {
                    const double x = v.cast<double>();
                    if (!(x >= 1 && x <= static_cast<double>(most)) || x != std::floor(x)) refuse();
                    return static_cast<index_t>(x);
                }
                if (!py::isinstance<py::int_>(v)) refuse();
                const auto big = v.cast<py::int_>();
                if (big < py::int_(1) || big > py::int_(most)) refuse();
                return big.cast<index_t>();
            };
            const index_t L = whole(length, "length"), B = whole(batch_arg, "batch");
            request.batch = B;
            request.length = L;
            request.valid_tokens = B * L <= most ? B * L : most;
            request.length_driver = "the input length (" + std::to_string(L) + " tokens)";
        }
        cli::add_generation(request, a, go, defaults.source);
        request.threads = threads_ > 0 ? threads_ : num_threads();
        request.device = device_;
        const auto est = models::estimate_memory(*cfg_, mo_, request);
        const auto budget = request_budget();
        py::list phases;
        for (const auto& p : est.phases) {
            py::list items;
            for (const auto& i : p.items) items.append(py::dict(py::arg("what") = i.what, py::arg("bytes") = i.bytes, py::arg("grows_with") = i.grows_with));
            phases.append(py::dict(py::arg("name") = p.name, py::arg("bytes") = p.bytes(), py::arg("items") = items));
        }
        return py::dict(py::arg("peak_bytes") = est.peak(), py::arg("peak_phase") = est.peak_phase().name, py::arg("phases") = phases,
                        py::arg("budget_bytes") = budget.bytes, py::arg("budget_source") = budget.source,
                        py::arg("fits") = est.peak() <= budget.bytes, py::arg("table") = est.table(), py::arg("batch") = request.batch,
                        py::arg("length") = request.length);
    }

    // Streaming: a worker thread decodes, the iterator hands over each token as it comes.
    class token_stream;
    std::shared_ptr<token_stream> stream(const std::shared_ptr<model>& self, const py::object& text, const py::object& prefix, const py::kwargs& kw);

    std::vector<int> tokenize(const py::object& text) { return tokenizer().encode(utf8_of(text, "tokenize: the text")); }
    std::string decode(const std::vector<std::int64_t>& ids) {
        std::vector<int> v(ids.begin(), ids.end());
        return tokenizer().decode(v, static_cast<int>(config().vocab_size));
    }

    // The generation options a call would use (defaults from the checkpoint, then the arguments).
    py::dict generation_settings(const py::kwargs& kw) {
        const cli::args a = call_args("generation_settings", kw);
        auto defaults = cli::read_generation_defaults(a, *ck_, "generation_settings");
        const auto go = cli::read_generation_options(a, "generation_settings", *cfg_, defaults.config);
        py::dict out;
        for (const auto& s : cli::generation_settings(a, go, defaults.source, defaults.given, defaults.from_task)) out[py::str(s.name)] = s.value;
        return out;
    }

    friend class token_stream;

private:
    struct text_batch {
        std::vector<std::vector<std::int64_t>> ids;
        index_t prefix = 0;  // ids of the question before every document
    };

    cli::args call_args(const std::string& command, const py::kwargs& kw) const {
        option_builder b(command, generation_option_names());
        for (const auto& [k, v] : kw) b.add(utf8_of(py::str(k), command + ": an argument's name"), v);
        return b.build();
    }

    // Each text tokenized as the tool does (the checkpoint's text prefix first; the question's
    // ids before every document). SLED is told the question's length.
    text_batch text_rows(const std::vector<std::string>& docs, const py::object& prefix, const std::string& text_prefix, const std::string& command) {
        text_batch out;
        const index_t V = config().vocab_size;
        const auto budget = host_budget();
        std::vector<std::int64_t> q;
        if (!prefix.is_none()) q = cli::text_ids(utf8_of(prefix, command + ": argument 'prefix'"), V, tokenizer(), budget, command + ": prefix");
        for (std::size_t d = 0; d < docs.size(); ++d) {
            const std::string name = command + ": text " + std::to_string(d);
            const std::string text = text_prefix + docs[d];
            cli::check_document_text(text, name);
            auto ids = cli::text_ids(text, V, tokenizer(), budget, name);
            ids.insert(ids.begin(), q.begin(), q.end());
            out.ids.push_back(std::move(ids));
        }
        out.prefix = static_cast<index_t>(q.size());
        return out;
    }

    // What every ids call does without the GIL and under the model's lock: the rows padded into a
    // batch, the request estimated (adjust adds the call's decoding) and refused over the budget,
    // SLED told the prefix, the calling thread's pool set; then work(batch).
    template <class Adjust, class Work>
    std::invoke_result_t<Work&, const cli::batch_input&> with_batch(std::vector<std::vector<std::int64_t>> rows, const std::string& command,
                                                                     index_t prefix_length, Adjust adjust, Work work) {
        computing nogil;
        std::lock_guard<std::mutex> lock(mu_);
        const auto in = cli::make_batch(std::move(rows), config().pad_token_id, command + ": ids");
        auto request = cli::batch_request(in);
        adjust(request, in);
        check_budget(request, command);
        set_prefix(prefix_length);
        threads_here();
        return work(in);
    }

    void check_ids(const std::vector<std::vector<std::int64_t>>& rows, const std::string& what) const {
        if (rows.empty()) throw error("encode.empty_input", what + ": no rows of ids");
        io::check_ids_vocab(io::id_batch{rows, rows.size() > 1}, config().vocab_size, what);
    }

    void set_prefix(index_t n) {
        if (sled_) model_->set_prefix_length(n);
        else if (n != 0)
            throw error("sled.bad_prefix", "prefix_length=" + std::to_string(n) + " applies to SLED (load the model with sled=dict(context=...)); "
                                           "without SLED a prefix is just the first ids of each row");
    }

    // What a request is checked against: memory_budget= when given, else the memory available now
    // on the model's device (device='cuda': the GPU's free memory) plus what the loaded model
    // already holds there.
    runtime::memory_budget request_budget() const {
        if (budget_) return *budget_;
        auto b = device_available();
        if (b.bytes < 1e18) {
            b.bytes += resident_;
            b.source += ", plus the loaded model's " + models::format_bytes(resident_);
        }
        return b;
    }
    runtime::memory_budget device_available() const {
        if (device_ == device_kind::cpu) return models::available_memory();
        const auto g = cli::cuda_devices().front();
        return {static_cast<double>(g.free_bytes), "free memory of cuda:" + std::to_string(g.index)};
    }
    // Tokenizing happens in host memory whatever the device.
    runtime::memory_budget host_budget() const { return device_ == device_kind::cpu ? request_budget() : models::available_memory(); }
    void check_budget(models::memory_request r, const std::string& command) const {
        r.threads = threads_ > 0 ? threads_ : num_threads();
        r.device = device_;
        const auto est = models::estimate_memory(*cfg_, mo_, r);
        models::check_memory_budget(est, model_ ? request_budget() : (budget_ ? *budget_ : device_available()), command);
    }

    // The calling thread's OpenMP pool size (a Python thread has its own) and denormal flushing.
    // Called under a signal_shield: the pool at this call's size has the signals blocked too,
    // including threads some other code on this thread created before any shield.
    void threads_here() const {
        set_num_threads(threads_);
        cli::flush_denormals_unless_kept();
        const sigset_t async = asynchronous_signals();
#pragma omp parallel
        pthread_sigmask(SIG_BLOCK, &async, nullptr);
    }

    // Encode and decode one batch, without the GIL; `on_token` sees each step's tokens.
    generation::generation_result run(const cli::batch_input& in, const generation::generation_options& go, python_callbacks& cb, timings& t,
                                      const std::function<bool(const generation::step_event&)>& on_token) {
        const auto t0 = clock::now();
        const index_t total = go.total_length() - 1;
        auto res = model_->generate(in, mask_of(in), go, cb.encode_callback(), [&](const generation::step_event& e) {
            cb.poll("decoding", static_cast<double>(e.step + 1), static_cast<double>(total));
            return on_token ? on_token(e) : true;
        }, t.encode_s);
        t.decode_s = std::chrono::duration<double>(clock::now() - t0).count() - t.encode_s;
        cb.finish();
        return res;
    }

    option_builder base_{"Model", model_option_names()};
    std::unique_ptr<io::checkpoint> ck_;
    models::model_options mo_;
    std::shared_ptr<const models::any_config> cfg_;
    std::unique_ptr<device_model> model_;
    device_kind device_ = device_kind::cpu;
    std::optional<text::tokenizer> tok_;
    std::optional<runtime::memory_budget> budget_;
    double resident_ = 0;
    int threads_ = 0;
    bool sled_ = false;
    std::mutex mu_;
};

// The iterator generate_tokens returns. The worker owns nothing Python: it pushes token ids into
// a queue under a mutex; __next__ waits (without the GIL, checking for Ctrl-C) and turns them into
// token_event objects. Closing it (close(), leaving a for loop early, garbage collection) asks the
// worker to stop at its next step and waits for it.
class model::token_stream {
public:
    token_stream(model& m, std::shared_ptr<model> owner, cli::batch_input in, generation::generation_options go, index_t prefix, bool decodes)
        : prefix_(prefix), decodes_(decodes), m_(m), owner_(std::move(owner)), in_(std::move(in)), go_(std::move(go)) {
        worker_ = std::thread([this] { work(); });
    }
    ~token_stream() {
        // Waiting for the worker's current step needs no Python: other threads run meanwhile.
        if (PyGILState_Check()) {
            py::gil_scoped_release nogil;
            stop();
        } else {
            stop();
        }
    }

    token_event next() {
        if (closed_) throw py::stop_iteration();  // a closed stream yields nothing more, decoded or not
        for (;;) {
            {
                std::unique_lock<std::mutex> lock(q_);
                if (!tokens_.empty()) break;
                if (done_) {
                    if (failure_) {
                        auto f = failure_;
                        failure_ = nullptr;
                        join();
                        std::rethrow_exception(f);
                    }
                    join();
                    throw py::stop_iteration();
                }
            }
            {
                py::gil_scoped_release nogil;
                std::unique_lock<std::mutex> lock(q_);
                cv_.wait_for(lock, python_callbacks::period, [&] { return !tokens_.empty() || done_; });
            }
            if (PyErr_CheckSignals() != 0) {
                stop();
                throw py::error_already_set();
            }
        }
        std::int64_t id;
        bool last;
        {
            std::unique_lock<std::mutex> lock(q_);
            id = tokens_.front();
            tokens_.pop_front();
            last = done_ && tokens_.empty() && !failure_;
        }
        ids_.push_back(id);
        token_event e;
        e.id = id;
        e.step = static_cast<index_t>(ids_.size()) - 1;
        e.is_last = last || go_.is_eos(id) || e.step + 1 >= go_.total_length() - 1;
        // The text this token adds: the decoded whole minus what was handed out already, held
        // back while it ends inside a character.
        const std::string whole = decodes_ ? m_.decode(ids_) : std::string();
        if (whole.compare(0, emitted_.size(), emitted_) == 0 && !(whole.size() >= 3 && whole.compare(whole.size() - 3, 3, "\xEF\xBF\xBD") == 0 && !e.is_last)) {
            e.text = whole.substr(emitted_.size());
            emitted_ = whole;
        }
        return e;
    }

    void close() {
        closed_ = true;
        py::gil_scoped_release nogil;
        stop();
    }

private:
    void work() {
        signal_shield shield;  // this thread and its pool compute: signals go to Python's threads
        const interrupt_check stop_here([this] {
            if (cancel_) throw cancelled();
        });
        try {
            std::lock_guard<std::mutex> lock(m_.mu_);
            m_.threads_here();
            if (m_.sled_) m_.model_->set_prefix_length(prefix_);
            double encode_s = 0;
            m_.model_->generate(
                in_, mask_of(in_), go_,
                [&](const models::encode_progress&) {
                    if (cancel_) throw cancelled();
                },
                [&](const generation::step_event& e) {
                    {
                        std::lock_guard<std::mutex> q(q_);
                        tokens_.push_back((*e.tokens)[0]);
                    }
                    cv_.notify_all();
                    return !cancel_.load();
                },
                encode_s);
        } catch (const cancelled&) {
        } catch (...) {
            std::lock_guard<std::mutex> q(q_);
            failure_ = std::current_exception();
        }
        {
            std::lock_guard<std::mutex> q(q_);
            done_ = true;
        }
        cv_.notify_all();
    }
    struct cancelled {};

    void stop() {
        cancel_ = true;
        join();
    }
    void join() {
        if (worker_.joinable()) worker_.join();
    }

    index_t prefix_ = 0;
    bool decodes_ = true;  // the tokens' text: a text input, or ids with a tokenizer at hand
    model& m_;
    std::shared_ptr<model> owner_;  // keeps the model alive while the worker runs
    cli::batch_input in_;
    generation::generation_options go_;
    std::thread worker_;
    std::mutex q_;
    std::condition_variable cv_;
    std::deque<std::int64_t> tokens_;
    bool done_ = false;
    std::exception_ptr failure_;
    std::atomic<bool> cancel_{false};
    bool closed_ = false;  // (touched with the GIL held)
    std::vector<std::int64_t> ids_;
    std::string emitted_;
};

} // namespace locost::python

namespace locost::python {

std::shared_ptr<model::token_stream> model::stream(const std::shared_ptr<model>& self, const py::object& input, const py::object& prefix,
                                                   const py::kwargs& kw) {
    const cli::args a = call_args("generate_tokens", kw);
    auto defaults = cli::read_generation_defaults(a, *ck_, "generate_tokens");
    const auto go = cli::read_generation_options(a, "generate_tokens", *cfg_, defaults.config);
    if (go.num_beams != 1)
        throw error("generate.invalid_option", "generation option 'num_beams' is " + std::to_string(go.num_beams) +
                                                   ", expected 1 for generate_tokens (it streams one sequence; beam search's best sequence "
                                                   "is known only at the end: use summarize)");
    if (go.do_sample && go.num_return_sequences != 1)
        throw error("generate.invalid_option", "generation option 'num_return_sequences' is " + std::to_string(go.num_return_sequences) +
                                                   ", expected 1 for generate_tokens (it streams one sequence)");
    text_batch rows;
    bool decodes = true;
    if (py::isinstance<py::str>(input)) {
        rows = text_rows({utf8_of(input, "generate_tokens: the text")}, prefix, defaults.prefix, "generate_tokens");
    } else {
        // One row of ids (a list or a 1-D array): the tokens' text when the checkpoint has a tokenizer.
        if (!py::isinstance<py::sequence>(input) && !py::isinstance<py::array>(input))
            throw error("python.bad_argument", "generate_tokens: expects a text (str) or one row of ids, got " + py::repr(input).cast<std::string>());
        py::list one;
        one.append(input);
        rows.ids = id_rows(one, "generate_tokens: ids");
        check_ids(rows.ids, "generate_tokens: ids");
        if (!prefix.is_none()) throw error("python.bad_argument", "generate_tokens: prefix (a text) goes with a text input; with ids, put the question's ids first");
        try {
            tokenizer();
        } catch (const error&) {
            decodes = false;
        }
    }
    auto in = cli::make_batch(rows.ids, config().pad_token_id, "generate_tokens: ids");
    auto request = cli::batch_request(in);
    cli::add_generation(request, a, go, defaults.source);
    check_budget(request, "generate_tokens");
    return std::make_shared<token_stream>(*this, self, std::move(in), go, rows.prefix, decodes);
}

} // namespace locost::python

namespace {

using namespace locost;
using locost::python::model;

PyObject* error_type = nullptr;

// generate_tokens needs the shared_ptr that owns the model (the stream keeps it alive).
std::shared_ptr<model::token_stream> make_stream(const std::shared_ptr<model>& self, const py::object& text, const py::object& prefix,
                                                 const py::kwargs& kw);

} // namespace

PYBIND11_MODULE(_locost, m) {
    m.doc() = "locost: long-document summarization (LOCOST, SLED, LongT5, LED, Pegasus-X, T5, BART) on the CPU, from Python.";
    m.attr("__version__") = LOCOST_VERSION_STRING;

    error_type = PyErr_NewExceptionWithDoc(
        "locost.Error",
        "What locost refuses or cannot do. `.id` is the stable id of the C++ library's locost::error (for example "
        "'checkpoint.not_found', 'memory.over_budget', 'generate.invalid_option'); `.message` its message; str() gives both.",
        PyExc_Exception, nullptr);
    m.add_object("Error", py::handle(error_type));
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const locost::error& e) {
            py::object inst = py::reinterpret_steal<py::object>(PyObject_CallFunction(error_type, "s", e.what()));
            if (!inst) return;  // the call set its own error
            inst.attr("id") = e.id();
            inst.attr("message") = e.message();
            PyErr_SetObject(error_type, inst.ptr());
        }
    });

    py::class_<python::token_event>(m, "Token", "One decoded token of generate_tokens().")
        .def_readonly("id", &python::token_event::id, "the token id")
        .def_readonly("text", &python::token_event::text,
                      "the text this token adds to the output (the texts of all tokens join to summarize()'s text; empty for a special "
                      "token or while a character is incomplete)")
        .def_readonly("step", &python::token_event::step, "0 for the first new token")
        .def_readonly("is_last", &python::token_event::is_last, "True for the last token (eos or the length limit)")
        .def("__repr__", [](const python::token_event& t) {
            return "Token(id=" + std::to_string(t.id) + ", text=" + py::repr(py::str(t.text)).cast<std::string>() + ", step=" +
                   std::to_string(t.step) + (t.is_last ? ", is_last=True)" : ")");
        });

    py::class_<python::summary>(m, "Summary", "summarize(..., details=True): a summary with its ids, score and timings.")
        .def_readonly("text", &python::summary::text)
        .def_readonly("ids", &python::summary::ids, "the generated ids, starting with the decoder start token")
        .def_readonly("score", &python::summary::score, "beam search: the sequence score (transformers' sequences_scores); None otherwise")
        .def_readonly("input_tokens", &python::summary::input_tokens, "tokens of the input (with the prefix)")
        .def_readonly("steps", &python::summary::steps, "decoding steps of the batch")
        .def_readonly("encode_seconds", &python::summary::encode_seconds, "the batch's encode, cross-attention cache included")
        .def_readonly("decode_seconds", &python::summary::decode_seconds, "the batch's decoding")
        .def("__repr__", [](const python::summary& s) { return "Summary(text=" + py::repr(py::str(s.text)).cast<std::string>() + ")"; });

    py::class_<model::token_stream, std::shared_ptr<model::token_stream>>(
        m, "TokenStream", "The iterator generate_tokens() returns. Leaving the loop early (or close()) stops the decoding.")
        .def("__iter__", [](const std::shared_ptr<model::token_stream>& s) { return s; })
        .def("__next__", &model::token_stream::next)
        .def("close", &model::token_stream::close, "Stops the decoding and waits for it.")
        .def("__enter__", [](const std::shared_ptr<model::token_stream>& s) { return s; })
        .def("__exit__", [](model::token_stream& s, py::args) { s.close(); });

    py::class_<text::tokenizer>(m, "Tokenizer",
                                "A checkpoint's tokenizer with its family's conventions (T5: </s> appended): a checkpoint directory, a "
                                "repository id in the Hugging Face cache, or a SentencePiece model file.")
        .def(py::init([](const std::string& path) {
                 py::gil_scoped_release nogil;
                 return cli::tokenizer_at(path);
             }),
             py::arg("path_or_name"))
        .def("encode", [](const text::tokenizer& t, const py::object& s) { return t.encode(locost::python::utf8_of(s, "Tokenizer.encode: the text")); }, py::arg("text"), "text → ids")
        .def(
            "decode",
            [](const text::tokenizer& t, const py::object& ids, int model_vocab) {
                std::vector<int> v;
                for (const auto& i : py::reinterpret_borrow<py::sequence>(ids)) v.push_back(i.cast<int>());
                return t.decode(v, model_vocab);
            },
            py::arg("ids"), py::arg("model_vocab") = 0, "ids → text; special tokens are skipped (ids below model_vocab but past the pieces too)")
        .def_property_readonly("vocab_size", &text::tokenizer::vocab_size)
        .def_property_readonly("path", &text::tokenizer::path);

    py::class_<model, std::shared_ptr<model>>(m, "Model", R"doc(An encoder-decoder checkpoint loaded on the CPU or a GPU.

Model(path_or_name, *, device="cpu", threads=None, weights="float32", compute="f32",
      cross_attention="cached", memory_budget=None, sled=None, **options)

path_or_name: a checkpoint directory (config.json + weights, as transformers writes it) or a
repository id 'org/name[@revision]' in the Hugging Face cache; any family locost reads (LOCOST,
T5, BART, LED, LongT5, Pegasus-X; a "tau/sled" config runs its backbone through SLED).
device: "cpu" or "cuda" (the first GPU; a module built with -DLOCOST_CUDA=ON, else the error
device.no_cuda_build): the same results as the CPU within float32 rounding.
threads: the OpenMP threads of each call (None: all). weights: float32 | bfloat16 | int8, the
decoder's per-step weights. compute: f32 | bf16 | int8, the encoder's products.
cross_attention: cached | folded. memory_budget: bytes (int) or a size such as "8G"; each call
is refused before it allocates when its estimate exceeds it (default: the memory available then).
sled: dict(context=256, window_fraction=0.5, encode_prefix=True) runs the encoder through SLED.
options: the tool's other model options by their Python names: backbone, tokenizer,
cross_cache (auto|float32|bfloat16|int8), conv_mode (exact|original-cuda), global_tokens (LED).

Generation options are keyword arguments of each call, under transformers' names:
max_new_tokens, max_length, min_new_tokens, min_length, num_beams, length_penalty,
early_stopping, num_return_sequences, do_sample, temperature, top_k, top_p, seed,
no_repeat_ngram_size, encoder_no_repeat_ngram_size, repetition_penalty, bad_words_ids,
forced_bos_token_id, forced_eos_token_id, suppress_tokens, begin_suppress_tokens,
decoder_start_token_id, eos_token_id, pad_token_id, beam_convention, generation_config, task.
Defaults come from the checkpoint's generation_config.json, as with `locost summarize`.)doc")
        .def(py::init<const py::object&, const py::object&, py::object, const py::object&, const py::object&, const py::object&, py::object,
                      py::object, py::kwargs>(),
             py::arg("path_or_name"), py::kw_only(), py::arg("device") = "cpu", py::arg("threads") = py::none(), py::arg("weights") = "float32",
             py::arg("compute") = "f32", py::arg("cross_attention") = "cached", py::arg("memory_budget") = py::none(), py::arg("sled") = py::none())
        .def("summarize", &model::summarize, py::arg("text"), py::kw_only(), py::arg("prefix") = py::none(), py::arg("details") = false,
             py::arg("max_batch_tokens") = 0, py::arg("progress") = py::none(),
             R"doc(Summarizes a text (→ str) or a list of texts in one batch (→ list of str).

A list's texts are encoded one at a time and decoded together, so each text's summary is that of
its own run. max_batch_tokens: batches of texts grouped by length, each at most this many padded
tokens (texts × longest), instead of one batch of all: many short texts run several times faster
than one by one, with the memory of one batch at a time. Results come back in the order given.

prefix: a question put before the document (before every chunk with SLED). details=True returns
Summary objects (text, ids, score, timings). num_return_sequences > 1 gives a list per text.
progress: a callable (phase, done, total), True for a tqdm bar (lines on stderr without tqdm), or
None. Ctrl-C interrupts the call (KeyboardInterrupt). Generation options: see Model.)doc")
        .def("generate_tokens", &make_stream, py::arg("text"), py::kw_only(), py::arg("prefix") = py::none(),
             R"doc(Streams the summary of one text: an iterator of Token objects (id, text, step, is_last) as they are decoded.

text: a str, or one row of ids (a list or a 1-D integer array; Token.text is then empty when the
checkpoint has no tokenizer). Leaving the loop early stops the decoding. Greedy or sampling only
(num_beams=1). Generation options: see Model.)doc")
        .def("generate", &model::generate, py::arg("ids"), py::kw_only(), py::arg("prefix_length") = 0, py::arg("progress") = py::none(),
             R"doc(Generates from token ids: a list of id lists (ragged: padded and masked) or a 2-D integer array.

Returns a list of id sequences (documents × num_return_sequences, each starting with the decoder
start token, padded to one length), as transformers' generate(). prefix_length (SLED): the first
ids of every row are a question put before every chunk.)doc")
        .def("encode", &model::encode, py::arg("ids"), py::kw_only(), py::arg("prefix_length") = 0, py::arg("progress") = py::none(),
             "The encoder's states, a float32 array (batch, length, d_model) (no copy); padding positions hold the model's "
             "values there, compare where the row has ids.")
        .def("score", &model::score, py::arg("ids"), py::arg("decoder_ids"), py::kw_only(), py::arg("prefix_length") = 0,
             py::arg("progress") = py::none(), "Teacher-forced logits, a float32 array (batch, decoder length, vocab).")
        .def("estimate", &model::estimate, py::arg("input") = py::none(), py::kw_only(), py::arg("length") = py::none(), py::arg("batch") = 1,
             R"doc(The memory a summarize/generate call would need, per phase, before any work (what `locost --dry-run` prints).

input: a text, a list of texts or ids; or length=N (and batch=B). Generation options as for
summarize. Returns a dict: peak_bytes, peak_phase, phases (name, bytes, items), budget_bytes,
budget_source, fits, table.)doc")
        .def("tokenize", &model::tokenize, py::arg("text"), "text → ids with the checkpoint's tokenizer and its family's conventions")
        .def("decode", &model::decode, py::arg("ids"), "ids → text (special tokens skipped)")
        .def("generation_settings", &model::generation_settings,
             "The generation options a call with these arguments would use, with the checkpoint's defaults: {name: value}.")
        .def_property_readonly("tokenizer", [](model& self) { return self.tokenizer(); })
        .def_property_readonly("path", &model::path, "the checkpoint directory")
        .def_property_readonly("family", &model::family, "the model family ('t5', 'bart', 'locost', ...)")
        .def_property_readonly("is_sled", &model::is_sled)
        .def_property_readonly("config", [](const model& self) {
            const auto& c = self.config();
            return py::dict(py::arg("model_type") = c.model_type, py::arg("vocab_size") = c.vocab_size, py::arg("d_model") = c.d_model,
                            py::arg("num_layers") = c.num_layers, py::arg("num_decoder_layers") = c.num_decoder_layers,
                            py::arg("num_heads") = c.num_heads, py::arg("d_ff") = c.d_ff, py::arg("pad_token_id") = c.pad_token_id,
                            py::arg("decoder_start_token_id") = c.decoder_start_token_id);
        })
        .def("__repr__", [](const model& self) { return "locost.Model(" + py::repr(py::str(self.path())).cast<std::string>() + ", family='" + self.family() + "')"; });
}

namespace {
std::shared_ptr<model::token_stream> make_stream(const std::shared_ptr<model>& self, const py::object& text, const py::object& prefix,
                                                 const py::kwargs& kw) {
    return self->stream(self, text, prefix, kw);
}
} // namespace
