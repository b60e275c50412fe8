// Shared by the test files: reference data access and the parity measure.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <locost/locost.hpp>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace test {

using locost::index_t;

inline const std::string data_dir = LOCOST_TEST_DATA;
inline const std::string reference_dir = data_dir + "/reference";
inline const std::string own_dir = data_dir + "/own";
inline const std::string tiny_dir = reference_dir + "/tiny_locost";

// A reference safetensors file, its tensors by name.
class reference {
public:
    explicit reference(const std::string& path) : file_(locost::io::safetensors_file::open(path)) {}

    bool has(const std::string& name) const { return file_.find(name) != nullptr; }
    const locost::io::tensor_record& record(const std::string& name) const {
        const auto* r = file_.find(name);
        if (!r) FAIL("reference " << file_.path() << " has no tensor " << name);
        return *r;
    }
    std::vector<float> floats(const std::string& name) const {
        const auto& r = record(name);
        std::vector<float> v(static_cast<std::size_t>(r.shape.numel()));
        REQUIRE(locost::convert_to_f32(r.type, r.bytes, v.data(), v.size()));
        return v;
    }
    std::vector<std::int64_t> ints(const std::string& name) const {
        const auto& r = record(name);
        REQUIRE(r.type == locost::dtype::i64);
        std::vector<std::int64_t> v(static_cast<std::size_t>(r.shape.numel()));
        if (!v.empty()) std::memcpy(v.data(), r.bytes, v.size() * 8);
        return v;
    }
    locost::shape_t shape(const std::string& name) const { return record(name).shape; }
    const locost::io::safetensors_file& file() const { return file_; }

private:
    locost::io::safetensors_file file_;
};

// max|ours − ref| / max|ref| over the positions where keep(i) (all when keep is empty).
template <class T>
double rel_error(const T* ours, const std::vector<float>& ref, const std::vector<bool>& keep = {}) {
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        if (!keep.empty() && !keep[i]) continue;
        diff = std::max(diff, std::abs(static_cast<double>(ours[i]) - static_cast<double>(ref[i])));
        scale = std::max(scale, std::abs(static_cast<double>(ref[i])));
    }
    return scale > 0 ? diff / scale : diff;
}

// Runs f, which must throw locost::error with exactly this id and message.
inline void check_error(const std::function<void()>& f, const std::string& id, const std::string& message) {
    INFO("expected [locost." << id << "] " << message);
    bool thrown = false;
    try {
        f();
    } catch (const locost::error& e) {
        thrown = true;
        CHECK(e.id() == id);
        CHECK(e.message() == message);
    }
    CHECK(thrown);
}

// A catalogue of malformed inputs: every case's file, path_of(case), fails through read(path)
// with exactly the case's id and "<path>: <message>".
template <class Cases, class PathOf, class Read>
void check_catalogue(const Cases& cases, PathOf path_of, Read read) {
    for (const auto& c : cases) {
        const std::string path = path_of(c);
        CAPTURE(path);
        check_error([&] { read(path); }, c.id, path + ": " + std::string(c.message));
    }
}

// Files in dir whose names end in ext: a catalogue's directory must hold exactly its cases, so
// a new file cannot go unchecked.
inline std::size_t count_files(const std::string& dir, const std::string& ext) {
    std::size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.path().extension() == ext;
    return n;
}

// A fresh, empty scratch directory under the test build's tmp folder.
inline std::string scratch_dir(const std::string& name) {
    const std::filesystem::path p = std::filesystem::path(LOCOST_TEST_TMP) / name;
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
    return p.string();
}

// A whole file's bytes ("" when it cannot be read: the caller's CHECK says what was expected).
inline std::string slurp(const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

// A tensor record's values as float32.
inline std::vector<float> as_floats(const locost::io::tensor_record& r) {
    std::vector<float> v(static_cast<std::size_t>(r.shape.numel()));
    if (!v.empty()) REQUIRE(locost::convert_to_f32(r.type, r.bytes, v.data(), v.size()));
    return v;
}

// The parity tolerance of the issues: 1e-4 · max|reference|.
inline constexpr double parity = 1e-4;

// Per-element keep mask for (B, L, H) tensors from a (B, L) 0/1 mask.
inline std::vector<bool> expand_mask(const std::vector<std::int64_t>& mask, index_t H) {
    std::vector<bool> keep;
    keep.reserve(mask.size() * static_cast<std::size_t>(H));
    for (auto m : mask)
        for (index_t h = 0; h < H; ++h) keep.push_back(m != 0);
    return keep;
}

// A tensor of any backend as a host vector (a copy through transfer<Backend>).
template <class T, class Backend>
std::vector<T> host_values(const locost::tensor<T, Backend>& t) {
    std::vector<T> v(static_cast<std::size_t>(t.numel()));
    locost::transfer<Backend>::download(v.data(), t.data(), v.size());
    return v;
}

// Encodes the reference ids `prefix.input_ids` (with `prefix.attention_mask` when present) on
// enc's backend; returns the states on the host and the positions to compare (empty: all).
template <class Enc>
auto encode_reference_case(Enc& enc, const reference& ref, const std::string& prefix, std::vector<bool>& keep) {
    const auto ids = ref.ints(prefix + ".input_ids");
    const auto shape = ref.shape(prefix + ".input_ids");
    const index_t B = shape[0], L = shape[1], H = enc.config().d_model;
    std::vector<float> mask;
    keep.clear();
    if (ref.has(prefix + ".attention_mask")) {
        const auto m = ref.ints(prefix + ".attention_mask");
        mask.assign(m.begin(), m.end());
        keep = expand_mask(m, H);
    }
    const auto h = enc.forward(ids.data(), mask.empty() ? nullptr : mask.data(), B, L);
    CHECK(h.shape() == locost::shape_t{B, L, H});
    return host_values(h);
}

// max|ours − ref| / max|ref| of `prefix.last_hidden_state` on valid positions.
template <class Enc>
double encode_error(Enc& enc, const reference& ref, const std::string& prefix) {
    std::vector<bool> keep;
    const auto h = encode_reference_case(enc, ref, prefix, keep);
    return rel_error(h.data(), ref.floats(prefix + ".last_hidden_state"), keep);
}

// Greedy decoding of one document (encoder ids `ids`, no mask) for `steps` steps: every step's
// logits, appended, and the ids chosen (the start token first) in `seq`.
template <class Model>
std::vector<typename Model::scalar> greedy_step_logits(Model& m, const std::vector<std::int64_t>& ids, index_t steps,
                                                       std::vector<std::int64_t>& seq) {
    const index_t V = m.config().vocab_size;
    auto e = m.encode(ids.data(), nullptr, 1, static_cast<index_t>(ids.size()));
    auto s = m.start(e, 1, steps);
    seq = {m.config().decoder_start_token_id};
    std::vector<typename Model::scalar> all, logits(static_cast<std::size_t>(V));
    for (index_t t = 0; t < steps; ++t) {
        const std::int64_t tok = seq.back();
        m.step(s, &tok, 1, logits.data());
        all.insert(all.end(), logits.begin(), logits.end());
        seq.push_back(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    return all;
}

// An input of L ids spread over the vocabulary (2 + 7919·i mod (V − 2)), for measurements.
inline std::vector<std::int64_t> spread_ids(index_t L, index_t vocab) {
    std::vector<std::int64_t> ids(static_cast<std::size_t>(L));
    for (index_t i = 0; i < L; ++i) ids[static_cast<std::size_t>(i)] = 2 + (i * 7919) % (vocab - 2);
    return ids;
}

// `steps` greedy steps of one encoded document from the start token; the decoding state is gone
// on return.
template <class Model, class Encoded>
void decode_greedily(Model& m, const Encoded& e, index_t steps) {
    auto st = m.start(e, 1, steps);
    std::vector<typename Model::scalar> logits(static_cast<std::size_t>(m.config().vocab_size));
    std::int64_t tok = m.config().decoder_start_token_id;
    for (index_t t = 0; t < steps; ++t) {
        m.step(st, &tok, 1, logits.data());
        tok = std::max_element(logits.begin(), logits.end()) - logits.begin();
    }
}

// The family-aware views of a checkpoint the tests use (models/registry.hpp).
inline locost::io::validation_report validate(const locost::io::checkpoint& ck) { return locost::models::validate(ck); }
inline std::vector<locost::io::parameter_spec> expected_parameters(const locost::io::checkpoint& ck) {
    return locost::models::expected_parameters(*locost::models::read_config(ck));
}
inline std::vector<std::string> expected_tensors(const locost::io::checkpoint& ck) {
    std::vector<std::string> out;
    for (auto& p : expected_parameters(ck)) out.push_back(std::move(p.name));
    return out;
}
inline void require_valid(const locost::io::checkpoint& ck) { ck.require_valid(expected_parameters(ck)); }
// The config of a checkpoint or file as the family struct C (a copy; fails the test otherwise).
template <class C = locost::models::locost_config>
C config_as(const std::shared_ptr<const locost::models::any_config>& c) {
    const auto* p = std::get_if<C>(c.get());
    REQUIRE(p != nullptr);
    return *p;
}
template <class C = locost::models::locost_config>
C config_of(const locost::io::checkpoint& ck) {
    return config_as<C>(locost::models::read_config(ck));
}

}  // namespace test
