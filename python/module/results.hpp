// What calls return: streamed tokens, summaries with details, arrays handed to numpy, and rows
// of ids read from Python.
#pragma once
#include "common.hpp"

namespace locost::python {

// ---- result objects -------------------------------------------------------------------------

struct token_event {
    std::int64_t id = 0;
    std::string text;  // the text this token adds to the output (may be empty: a partial character, a special token)
    index_t step = 0;
    bool is_last = false;
    float logprob = 0;  // log-probability of the token under the distribution it was chosen from
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

// Whether v is a numpy array, without importing numpy: the module runs without it (texts in, texts
// out), and an array can only come from a process that imported it.
inline bool is_numpy_array(const py::handle& v) {
    const py::dict modules = py::module_::import("sys").attr("modules");
    if (!modules.contains("numpy")) return false;
    return py::isinstance<py::array>(v);
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
    if (is_numpy_array(v)) {
        const py::array a = py::reinterpret_borrow<py::array>(v);
        if (a.ndim() != 2 || (a.dtype().kind() != 'i' && a.dtype().kind() != 'u'))
            throw error("python.bad_argument",
                        what + " expects a 2-D integer array (batch, length) or a list of lists of ids, got a " + std::to_string(a.ndim()) +
                            "-D array of dtype " + py::str(a.dtype()).cast<std::string>());
        const auto ids = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
        const auto r = ids.unchecked<2>();
        rows.assign(static_cast<std::size_t>(r.shape(0)), {});
        for (py::ssize_t b = 0; b < r.shape(0); ++b)
            for (py::ssize_t l = 0; l < r.shape(1); ++l) rows[static_cast<std::size_t>(b)].push_back(r(b, l));
        return rows;
    }
    if (!py::isinstance<py::sequence>(v) || py::isinstance<py::str>(v))
        throw error("python.bad_argument",
                    what + " expects a list of lists of ids or a 2-D integer array, got " + py::repr(v).cast<std::string>());
    for (const auto& row : py::reinterpret_borrow<py::sequence>(v)) {
        if (!py::isinstance<py::sequence>(row) || py::isinstance<py::str>(row))
            throw error("python.bad_argument",
                        what + " expects a list of lists of ids (one list per document), got an element " +
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

}  // namespace locost::python
