// Python values into the option table (locost/options/): keyword arguments checked by the
// records the tool's flags come from, strings as UTF-8, and the Model docstring's account of them.
#pragma once
#include <random>
#include "common.hpp"

namespace locost::python {


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
        throw error("python.bad_argument",
                    what + ": the text holds a lone surrogate at index " + std::to_string(at) +
                        " (U+D800..U+DFFF alone is not Unicode text; decode bytes with errors='replace')");
    }
    std::string out(s, static_cast<std::size_t>(n));
    if (path) {
        if (const auto nul = out.find('\0'); nul != std::string::npos)
            throw error("python.bad_argument", what + ": the path holds a NUL character at byte " + std::to_string(nul));
    }
    return out;
}

inline std::string repr_of(const py::handle& v, std::size_t at_most = 200) {
    return locost::io::detail::printable(py::repr(v).cast<std::string>(), at_most);
}

// A Python value as the JSON value the option table checks: None, bool, int (numpy's too, through
// __index__), float, str (os.PathLike too), and lists or tuples of them two deep (lists of ids, lists of lists).
// Anything else is python.bad_argument naming the argument (`what`); the table then checks the
// value against the option's record.
inline options::json json_of(const py::handle& v, const std::string& what, int depth = 0) {
    if (v.is_none()) return nullptr;
    if (py::isinstance<py::bool_>(v)) return v.cast<bool>();
    if (py::isinstance<py::float_>(v)) return v.cast<double>();
    if (py::isinstance<py::str>(v)) return utf8_of(v, what);
    // A path as open() takes one: str or os.PathLike (pathlib.Path); the table says where a path fits.
    if (py::hasattr(v, "__fspath__")) return utf8_of(py::module_::import("os").attr("fspath")(v), what, /*path=*/true);
    if (py::isinstance<py::int_>(v) || (!py::isinstance<py::str>(v) && PyIndex_Check(v.ptr()))) {
        const py::int_ i = py::reinterpret_steal<py::int_>(PyNumber_Index(v.ptr()));
        int overflow = 0;
        const long long x = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
        if (overflow == 0) return static_cast<std::int64_t>(x);
        if (overflow > 0) {
            const unsigned long long u = PyLong_AsUnsignedLongLong(i.ptr());
            if (!PyErr_Occurred()) return static_cast<std::uint64_t>(u);
            PyErr_Clear();
        }
        throw error("python.bad_argument", what + " expects a value in 64 bits, got " + repr_of(v));
    }
    if ((py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) && depth < 2) {
        options::json out = options::json::array();
        for (const auto& item : v) out.push_back(json_of(item, what, depth + 1));
        return out;
    }
    throw error("python.bad_argument", what + " expects a number, a string or a list, got " + repr_of(v));
}

// `name` with revision=, as from_pretrained takes it: the tool's org/name@revision. Errors
// (python.bad_argument): a revision for a directory, or for a name that gives one already.
inline std::string with_revision(const std::string& name, const py::object& revision, const std::string& command) {
    if (revision.is_none()) return name;
    const std::string rev = utf8_of(revision, command + ": argument 'revision'");
    std::error_code ec;
    if (std::filesystem::is_directory(name, ec))
        throw error("python.bad_argument",
                    command +
                        ": argument 'revision' applies to a repository id of the Hugging Face cache ('org/name'), not to the directory " +
                        io::detail::printable(name, 200));
    if (name.find('@') != std::string::npos)
        throw error("python.bad_argument",
                    command + ": '" + io::detail::printable(name, 200) + "' names a revision already (org/name@revision): give it once");
    return name + "@" + rev;
}

// keyword arguments → the options `allowed`; None means "not given". Errors: python.unknown_argument
// naming the argument and the ones the call takes; python.bad_argument from the table's checks.
inline options::given given_of(const std::string& command, const std::vector<std::pair<std::string, py::object>>& kw,
                               const std::vector<const options::record*>& allowed) {
    std::vector<std::pair<std::string, options::json>> values;
    for (const auto& [name, v] : kw) values.emplace_back(name, json_of(v, command + ": argument '" + name + "'"));
    return options::given(command, options::spelling::keyword, values, allowed);
}

// Sampling without a seed draws a fresh one, as transformers and CTranslate2 do: two calls give
// two samples. A given seed (0 included) gives the same tokens every time.
inline void draw_seed_unless_given(const options::given& a, generation::generation_options& go) {
    if (!go.do_sample || a.has("seed")) return;
    thread_local std::mt19937_64 fresh{std::random_device{}()};
    go.seed = fresh();
}

// The options a Model takes (what to load, where, and the model's run-time options) and those a
// generating call takes.
inline const std::vector<const options::record*>& model_records() {
    static const auto r = [] {
        std::vector<const options::record*> out;
        for (const auto* x : options::records_of({options::group::checkpoint, options::group::run, options::group::model}))
            if (x->name != "dry_run") out.push_back(x);
        return out;
    }();
    return r;
}
inline const std::vector<const options::record*>& generation_records() {
    static const auto r = options::records_of({options::group::generation});
    return r;
}

// The Model docstring's account of the options, from the table: the model's own (beyond those
// in its signature) and the generation options each call takes.
inline std::string model_options_doc() {
    auto listing = [](const std::vector<const options::record*>& records, const std::set<std::string>& skip) {
        std::string out, line;
        for (const auto* r : records) {
            if (skip.count(std::string(r->name))) continue;
            std::string item(r->name);
            if (r->type == options::value_type::choice) {
                std::string names;
                for (const auto& c : r->choices)
                    if (!c.alias) names += (names.empty() ? "" : "|") + std::string(c.name);
                item += " (" + names + ")";
            }
            item += ", ";
            if (line.size() + item.size() > 96) {
                out += line + "\n";
                line.clear();
            }
            line += item;
        }
        out += line;
        if (out.size() >= 2) out.resize(out.size() - 2);
        return out;
    };
    return "options: the model's other options, as `locost` names them with underscores:\n" +
        listing(model_records(),
                {"model", "device", "threads", "weights", "compute", "cross_attention", "memory_budget", "cache_dir", "sled_context",
                 "sled_window_fraction", "no_encode_prefix"}) +
        ".\n\nGeneration options are keyword arguments of each call, under transformers' names:\n" + listing(generation_records(), {}) +
        ".\nDefaults come from the checkpoint's generation_config.json, as with `locost summarize`; a value is checked\n"
        "as the tool checks it, and a bad one is locost.Error python.bad_argument naming the argument.";
}

}  // namespace locost::python
