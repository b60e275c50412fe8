// A model checkpoint directory: config.json plus the weights, with name resolution for tied
// embeddings and validation against a parameter list. Which parameters a model reads is its
// family's knowledge (recorded from its loaders, models/registry.hpp); this file
// only reads files: config.json is kept as a JSON object for the family to parse.
//
// Layout (Hugging Face save_pretrained; by name from the Hugging Face cache: hub_cache.hpp):
//   DIR/config.json                        required (or an explicit config path)
//   DIR/model.safetensors                  one of these three, tried in this order
//   DIR/model.safetensors.index.json       + the shards it names (safetensors.hpp)
//   DIR/pytorch_model.bin                  PyTorch zip/pickle (pytorch.hpp)
//   DIR/generation_config.json             optional
//
// Design
//  * Weights stay in their mapping; load_f32() widens one tensor to float32 on request
//    (F16/BF16 exactly). Weights the model reads must be F32, F16 or BF16: validate() lists
//    others under wrong_dtype and load_f32() refuses them (checkpoint.unsupported_dtype).
//    Tensors the model does not read may have any dtype (e.g. integer buffers).
//  * Tied names. `shared.weight`, `encoder.embed_tokens.weight` and
//    `decoder.embed_tokens.weight` (T5) — or the same under `model.` (BART) — are one
//    parameter: record() of any of them returns the same record, the first stored in that order. When several are stored they must be identical
//    (dtype, shape and bytes), else checkpoint.tied_mismatch. With tie_word_embeddings true,
//    `lm_head.weight` resolves to that embedding too — even when the file stores a separate
//    lm_head.weight (Hugging Face ties it on load; the stored copy is ignored, and validate()
//    warns if it differs). The model scales the tied head's input by d_model^-0.5 itself.
//  * Base-model checkpoints. A family whose names start with `model.` (BART: the weights of
//    BartForConditionalGeneration) also reads a checkpoint of the bare base model, saved without
//    that prefix: when no stored name starts with `model.`, every name also resolves with it.
//  * Non-finite weights. load_f32() scans what it converted (at memory speed, while the tensor
//    is still in cache) and refuses a NaN or an infinity with checkpoint.non_finite naming the
//    file, the tensor and the element: such a model would produce garbage without a word.
//  * validate(expected) compares the stored tensors with a family's parameter list: missing
//    tensors (unless the list marks them optional) and shape mismatches make it fail; stored
//    tensors the model does not read are warnings.
#pragma once
#include <sys/mman.h>
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../config/error.hpp"
#include "../core/dtype.hpp"
#include "../core/tensor.hpp"
#include "checkpoint_decl.hpp"
#include "config.hpp"
#include "file_access.hpp"
#include "hub_cache.hpp"
#include "safetensors.hpp"
#include "tensor_record.hpp"
#include "pytorch.hpp"

namespace locost::io {

struct validation_report {
    std::vector<std::string> missing;      // expected tensors that are not stored
    std::vector<std::string> wrong_shape;  // "name: found (a, b), expected (c, d)"
    std::vector<std::string> wrong_dtype;  // "name: I8 (expected F32, F16 or BF16)"
    std::vector<std::string> unexpected;   // stored tensors the model does not read (warning)
    std::vector<std::string> warnings;     // other remarks, e.g. an ignored lm_head.weight

    bool ok() const noexcept { return missing.empty() && wrong_shape.empty() && wrong_dtype.empty(); }

    // "missing tensors: a, b; wrong shapes: x: found (2,), expected (3,)" (at most 8 names
    // per list, then "and N more"); empty when ok().
    std::string errors() const {
        std::string s;
        auto list = [&](const char* what, const std::vector<std::string>& v) {
            if (v.empty()) return;
            if (!s.empty()) s += "; ";
            s += what;
            s += ": ";
            for (std::size_t i = 0; i < v.size() && i < 8; ++i) s += (i ? ", " : "") + v[i];
            if (v.size() > 8) s += ", and " + std::to_string(v.size() - 8) + " more";
        };
        list("missing tensors", missing);
        list("wrong shapes", wrong_shape);
        list("wrong dtypes", wrong_dtype);
        return s;
    }
};

// One tensor a model reads: its name in the checkpoint and its shape.
struct parameter_spec {
    std::string name;
    shape_t shape;
    bool optional = false;  // the model has a default when the checkpoint lacks it
};

#if LOCOST_API_DEFINITIONS

// What an open checkpoint holds (shared, never changed after open(): copies of a checkpoint are
// one contents), and the work behind checkpoint's members (io/checkpoint_decl.hpp says what each
// one does and which errors it raises).
struct checkpoint::contents {
    static contents open(const std::string& dir_or_name, const cache_location& cache) {
        const std::string dir = resolve_model_dir(dir_or_name, cache);
        check_directory(dir);
        const directory_files files(dir);
        contents c = open_with(files, files.require(file_config, "checkpoint.missing_config", dir + ": no " + std::string(file_config)));
        c.cache_ = cache;
        return c;
    }

    static contents open(const std::string& dir_or_name, const std::string& config_path, const cache_location& cache) {
        const std::string dir = resolve_model_dir(dir_or_name, cache);
        check_directory(dir);
        contents c = open_with(directory_files(dir), config_path);
        c.cache_ = cache;
        return c;
    }

    static contents open_with(const directory_files& files, const std::string& config_path) {
        const std::string& dir = files.dir();
        contents c;
        c.dir_ = dir;
        c.config_path_ = config_path;
        c.config_ = read_config_object(read_text_file(config_path), config_path);
        c.tie_word_embeddings_ = detail::field_reader(c.config_, c.config_path_, "config").boolean("tie_word_embeddings", true);
        if (const auto g = files.find("generation_config.json")) c.generation_ = load_generation_config(*g);
        if (const auto p = files.find(file_safetensors)) {
            c.weights_ = *p;
            c.records_ = read_safetensors(c.weights_);
        } else if (const auto i = files.find(file_index)) {
            c.weights_ = *i;
            c.records_ = read_sharded_safetensors(c.weights_);
        } else if (const auto b = files.find(file_pytorch)) {
            c.weights_ = *b;
            c.records_ = read_pytorch_bin(c.weights_);
        } else {
            throw error("checkpoint.no_weights",
                        dir + ": no weights (expected " + std::string(file_safetensors) + ", " + file_index + " or " + file_pytorch + ")");
        }
        c.index_records();
        return c;
    }

    bool has(std::string_view name) const { return resolved_.find(name) != resolved_.end(); }

    const tensor_record& record(std::string_view name) const {
        const auto it = resolved_.find(name);
        if (it == resolved_.end()) throw error("checkpoint.missing_tensor", weights_ + ": no tensor '" + detail::printable(name) + "'");
        return records_[it->second];
    }

    // Loading at memory speed (bench/RESULTS.md, "Loading"). A tensor's mapped file pages and
    // its destination are mapped in one call each (MADV_POPULATE_READ / _WRITE, core/aligned.hpp)
    // instead of one fault per 4 KiB page. Hints only: an older kernel loads as before.
    static void prepare_pages(const tensor_record& r, float* dst, std::size_t dst_bytes) noexcept {
#ifdef MADV_POPULATE_READ
        if (r.file_backed && r.nbytes >= (std::size_t{1} << 16)) {
            const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
            const auto b = reinterpret_cast<std::uintptr_t>(r.bytes) / page * page;
            const auto e = (reinterpret_cast<std::uintptr_t>(r.bytes) + r.nbytes + page - 1) / page * page;
            ::madvise(reinterpret_cast<void*>(b), e - b, MADV_POPULATE_READ);
        }
#endif
        prefault_pages(dst, dst_bytes);
    }

    // Converts record r into dst (n floats) and returns the index of its first non-finite value
    // (or n). Large tensors are split over the OpenMP threads: conversion and the scan run at
    // each core's copy speed, so two cores load about twice as fast as one.
    static std::size_t convert_checked(const tensor_record& r, float* dst, std::size_t n) {
        constexpr std::size_t chunk = std::size_t{1} << 20;  // elements per piece (4 MiB of float32)
        const std::size_t pieces = (n + chunk - 1) / chunk, elem = size_of(r.type);
        std::size_t bad = n;
        auto piece = [&](std::size_t i) {
            const std::size_t b = i * chunk, m = std::min(chunk, n - b);
            const bool ok = convert_to_f32(r.type, r.bytes + b * elem, dst + b, m);
            LOCOST_ASSERT(ok);  // F32, F16 and BF16 always convert
            return b + first_non_finite(dst + b, m);
        };
        if (pieces == 1) return piece(0);
#pragma omp parallel for schedule(static) reduction(min : bad)
        for (std::size_t i = 0; i < pieces; ++i) {
            const std::size_t at = piece(i);
            if (at < std::min(n, (i + 1) * chunk)) bad = std::min(bad, at);
        }
        return bad;
    }

    // The index of the first NaN or infinity of x[0, n), or n. Blocks are tested with an OR of
    // exponent checks that vectorises; only a block that has one is searched element by element.
    static std::size_t first_non_finite(const float* x, std::size_t n) {
        constexpr std::size_t block = 1024;
        for (std::size_t b = 0; b < n; b += block) {
            const std::size_t e = std::min(n, b + block);
            unsigned any = 0;
            for (std::size_t i = b; i < e; ++i) {
                std::uint32_t u;
                std::memcpy(&u, x + i, sizeof u);
                any |= static_cast<unsigned>((u & 0x7f800000u) == 0x7f800000u);
            }
            if (any)
                for (std::size_t i = b; i < e; ++i)
                    if (!std::isfinite(x[i])) return i;
        }
        return n;
    }

    tensor<float> load_f32(const std::string& name, const shape_t& expected) const {
        const tensor_record& r = record(name);
        if (!is_weight_dtype(r.type))
            throw error("checkpoint.unsupported_dtype",
                        r.source + ": unsupported dtype " + std::string(locost::safetensors_name(r.type)) + " for tensor '" + name +
                            "' (expected F32, F16 or BF16)");
        if (r.shape != expected)
            throw error("checkpoint.shape_mismatch",
                        r.source + ": tensor '" + name + "' has shape " + r.shape.str() + ", expected " + expected.str());
        tensor<float> t(r.shape);
        if (t.numel() > 0) {
            const std::size_t n = static_cast<std::size_t>(t.numel());
            prepare_pages(r, t.data(), n * sizeof(float));
            const std::size_t bad = convert_checked(r, t.data(), n);
            if (bad < n)
                throw error("checkpoint.non_finite",
                            r.source + ": tensor '" + name + "' holds a non-finite value (" +
                                (std::isnan(t.data()[bad]) ? "nan"
                                     : t.data()[bad] > 0   ? "inf"
                                                           : "-inf") +
                                ") at element " + std::to_string(bad) + " of " + std::to_string(n) +
                                "; the weights are corrupt or overflowed when saved");
            // The converted copy is what the model keeps; drop the mapped pages so that a loaded
            // model does not also hold the file in its resident memory.
            if (r.file_backed) release_pages(const_cast<std::byte*>(r.bytes), r.nbytes);
        }
        return t;
    }

    validation_report validate(const std::vector<parameter_spec>& expected) const {
        validation_report v;
        std::set<std::string, std::less<>> known;
        for (const auto& n : tied_names_) known.insert(n);
        if (tie_word_embeddings_) known.insert("lm_head.weight");
        for (const auto& p : expected) {
            known.insert(p.name);
            const auto it = resolved_.find(p.name);
            if (it == resolved_.end()) {
                if (!p.optional) v.missing.push_back(p.name);
            } else {
                const tensor_record& r = records_[it->second];
                if (r.shape != p.shape) v.wrong_shape.push_back(p.name + ": found " + r.shape.str() + ", expected " + p.shape.str());
                if (!is_weight_dtype(r.type))
                    v.wrong_dtype.push_back(p.name + ": " + std::string(locost::safetensors_name(r.type)) + " (expected F32, F16 or BF16)");
            }
        }
        for (const auto& r : records_) {
            const std::string_view n = std::string_view(r.name).substr(wrapped_ ? wrapper_prefix.size() : 0);
            if (!known.count(n) && !(base_model_ && known.count(std::string(base_prefix) + std::string(n)))) v.unexpected.push_back(r.name);
        }
        v.warnings = warnings_;
        return v;
    }

    void require_valid(const std::vector<parameter_spec>& expected) const {
        const validation_report v = validate(expected);
        if (!v.ok()) throw error("checkpoint.invalid", dir_ + ": the weights do not match config.json (" + v.errors() + ")");
    }

    static void check_directory(const std::string& dir) {
        std::error_code ec;
        if (!std::filesystem::is_directory(dir, ec)) throw error("checkpoint.not_a_directory", dir + ": not a directory");
    }

    static bool is_weight_dtype(dtype t) noexcept { return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16; }

    static bool same_tensor(const tensor_record& a, const tensor_record& b) {
        return a.type == b.type && a.shape == b.shape && a.nbytes == b.nbytes &&
            (a.bytes == b.bytes || a.nbytes == 0 || std::memcmp(a.bytes, b.bytes, a.nbytes) == 0);
    }

    // A wrapper model's attribute prefix common to every stored name (SLED's SledModel keeps
    // its backbone as `_underlying_model`): names resolve without it.
    static constexpr std::string_view wrapper_prefix = "_underlying_model.";
    // The attribute under which a task model keeps its base model (BART's `model.`).
    static constexpr std::string_view base_prefix = "model.";
    // One tied embedding (Hugging Face's `shared`, which each stack's embed_tokens repeats): its
    // names under a root are these; the roots are the bare names', base_prefix's and any other
    // a stored copy shows (LED keeps its base model under its own attribute).
    static constexpr std::string_view tied_suffixes[] = {"shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight"};

    // The tied embedding's names in the order a stored copy is preferred: bare, base_prefix, then
    // the other roots stored names show (a single attribute: "x.").
    std::vector<std::string> find_tied_names() const {
        std::vector<std::string> roots = {"", std::string(base_prefix)};
        for (const auto& entry : resolved_)
            for (std::string_view suffix : tied_suffixes) {
                const std::string_view n = entry.first;
                if (n.size() <= suffix.size() || n.substr(n.size() - suffix.size()) != suffix) continue;
                const std::string root(n.substr(0, n.size() - suffix.size()));
                if (root.find('.') == root.size() - 1 && std::find(roots.begin(), roots.end(), root) == roots.end()) roots.push_back(root);
            }
        std::vector<std::string> names;
        for (const auto& root : roots)
            for (std::string_view suffix : tied_suffixes) names.push_back(root + std::string(suffix));
        return names;
    }

    void index_records() {
        wrapped_ = !records_.empty() && std::all_of(records_.begin(), records_.end(), [](const tensor_record& r) {
            return std::string_view(r.name).substr(0, wrapper_prefix.size()) == wrapper_prefix;
        });
        for (std::size_t i = 0; i < records_.size(); ++i) {
            const tensor_record& r = records_[i];
            const std::string key = wrapped_ ? r.name.substr(wrapper_prefix.size()) : r.name;
            if (!resolved_.emplace(key, i).second)
                throw error("checkpoint.duplicate_tensor", weights_ + ": tensor '" + detail::printable(r.name) + "' is stored twice");
        }
        // A bare base model's names also resolve under the task model's prefix.
        base_model_ = !records_.empty() && std::none_of(resolved_.begin(), resolved_.end(), [](const auto& e) {
            return std::string_view(e.first).substr(0, base_prefix.size()) == base_prefix;
        });
        if (base_model_) {
            std::vector<std::pair<std::string, std::size_t>> prefixed;
            for (const auto& [name, i] : resolved_) prefixed.emplace_back(std::string(base_prefix) + name, i);
            resolved_.insert(prefixed.begin(), prefixed.end());
        }
        // Tied embedding: the first stored of the names is the one.
        tied_names_ = find_tied_names();
        std::optional<std::size_t> embedding;
        std::string embedding_name;
        for (const auto& n : tied_names_) {
            const auto it = resolved_.find(std::string_view(n));
            if (it == resolved_.end()) continue;
            if (!embedding) {
                embedding = it->second;
                embedding_name = n;
            } else if (!same_tensor(records_[*embedding], records_[it->second])) {
                throw error("checkpoint.tied_mismatch",
                            weights_ + ": tied tensors '" + embedding_name + "' and '" + n +
                                "' differ (they are one embedding and must be identical)");
            }
        }
        if (!embedding) return;
        for (const auto& n : tied_names_) resolved_[n] = *embedding;
        if (tie_word_embeddings_) {
            const auto it = resolved_.find(std::string_view("lm_head.weight"));
            if (it != resolved_.end() && !same_tensor(records_[it->second], records_[*embedding]))
                warnings_.push_back("lm_head.weight differs from " + embedding_name +
                                    " and is ignored because tie_word_embeddings is true");
            resolved_["lm_head.weight"] = *embedding;
        }
    }

    std::string dir_;
    cache_location cache_;
    std::string weights_;
    std::string config_path_;
    json config_;
    bool tie_word_embeddings_ = true;
    bool wrapped_ = false;     // every name starts with wrapper_prefix
    bool base_model_ = false;  // no name starts with base_prefix: names resolve with it too
    std::optional<generation_config> generation_;
    std::vector<tensor_record> records_;
    std::map<std::string, std::size_t, std::less<>> resolved_;
    std::vector<std::string> tied_names_;  // find_tied_names()
    std::vector<std::string> warnings_;
};

LOCOST_API checkpoint::checkpoint() : c_(std::make_shared<const contents>()) {}
LOCOST_API checkpoint checkpoint::open(const std::string& dir_or_name, const cache_location& cache) {
    return checkpoint(contents::open(dir_or_name, cache));
}
LOCOST_API checkpoint checkpoint::open(const std::string& dir_or_name, const std::string& config_path, const cache_location& cache) {
    return checkpoint(contents::open(dir_or_name, config_path, cache));
}
LOCOST_API checkpoint::checkpoint(contents&& c) : c_(std::make_shared<const contents>(std::move(c))) {}
LOCOST_API const json& checkpoint::config_json() const noexcept { return c_->config_; }
LOCOST_API const std::string& checkpoint::config_path() const noexcept { return c_->config_path_; }
LOCOST_API bool checkpoint::tie_word_embeddings() const noexcept { return c_->tie_word_embeddings_; }
LOCOST_API const std::optional<generation_config>& checkpoint::generation() const noexcept { return c_->generation_; }
LOCOST_API const std::string& checkpoint::dir() const noexcept { return c_->dir_; }
LOCOST_API const cache_location& checkpoint::cache() const noexcept { return c_->cache_; }
LOCOST_API const std::string& checkpoint::weights_path() const noexcept { return c_->weights_; }
LOCOST_API const std::vector<tensor_record>& checkpoint::records() const noexcept { return c_->records_; }
LOCOST_API bool checkpoint::has(std::string_view name) const { return c_->has(name); }
LOCOST_API const tensor_record& checkpoint::record(std::string_view name) const { return c_->record(name); }
LOCOST_API tensor<float> checkpoint::load_f32(const std::string& name, const shape_t& expected) const {
    return c_->load_f32(name, expected);
}
LOCOST_API validation_report checkpoint::validate(const std::vector<parameter_spec>& expected) const { return c_->validate(expected); }
LOCOST_API void checkpoint::require_valid(const std::vector<parameter_spec>& expected) const { c_->require_valid(expected); }

#endif  // LOCOST_API_DEFINITIONS

}  // namespace locost::io
