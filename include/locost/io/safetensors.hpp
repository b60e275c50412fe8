// safetensors: reader (memory-mapped, fully validated), writer, and sharded checkpoints.
//
// Format (https://github.com/huggingface/safetensors): an 8-byte little-endian header length n,
// n bytes of JSON header, then the data buffer. The header maps each tensor name to
//   {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
// (offsets relative to the data buffer) plus an optional "__metadata__" object of strings.
//
// Design
//  * The reader maps the file once; each tensor_record points into the mapping and shares its
//    ownership, so records stay valid after the reader is gone. Records may be unaligned:
//    consumers copy or convert them (convert_to_f32 uses memcpy).
//  * Everything a hostile file could get wrong is checked before a record is handed out, each
//    with its own error id (docs/errors.md): the header length against the file and a
//    100 MB limit; the header as strict JSON (no duplicate keys, bounded nesting); every entry's
//    field types; shapes as non-negative integers whose element count and byte size fit
//    without overflow; offsets inside the data buffer with begin <= end and the byte size equal
//    to shape x dtype size; and the sorted entries tiling the buffer exactly (no overlap, no
//    hole, no trailing bytes). Work is linear in the header size plus a sort of the entries.
//  * This reader accepts every dtype locost knows (F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL):
//    reference files hold int64 token ids. The checkpoint loader (checkpoint.hpp) is the one
//    that insists on F32/F16/BF16 weights. Dtypes locost does not know (F8_*, U16, ...) are
//    rejected here, by name.
//  * Unknown fields inside a tensor entry are ignored (the format may grow).
//  * The writer copies what it is given, writes __metadata__ first and the tensors in the
//    order added, pads the header with spaces to a multiple of 8, and writes to a temporary
//    file in the same directory that is renamed over the destination, so a reader never sees
//    a half-written file. It can narrow float32 to F16 or BF16 (round to nearest even).
//  * Sharded checkpoints (model.safetensors.index.json): see read_sharded_safetensors().
#pragma once
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../config/error.hpp"
#include "../core/dtype.hpp"
#include "../core/tensor.hpp"
#include "../core/utf8.hpp"
#include "atomic_file.hpp"
#include "json.hpp"
#include "mapped_file.hpp"
#include "tensor_record.hpp"

namespace locost::io {

// Largest header accepted (the reference implementation's limit).
inline constexpr std::uint64_t safetensors_max_header = 100'000'000;

namespace detail {

inline std::string offsets_str(std::uint64_t b, std::uint64_t e) { return "[" + std::to_string(b) + ", " + std::to_string(e) + "]"; }

// A JSON value as a message shows it: integers by value, anything else by its type.
inline std::string describe_json(const json& v) {
    if (v.is_number_integer()) return v.dump();
    return "a JSON " + json_type_name(v);
}

// Element count and byte size of `shape` x `t`, or false if any partial product leaves int64.
inline bool checked_size(const shape_t& shape, dtype t, std::uint64_t& nbytes) {
    constexpr std::uint64_t max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    std::uint64_t n = 1;
    for (index_t d : shape) {
        if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(d), &n) || n > max) return false;
    }
    if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(size_of(t)), &nbytes) || nbytes > max) return false;
    return true;
}

inline std::string known_dtypes() { return "F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL"; }

}  // namespace detail

// One validated safetensors image.
class safetensors_file {
public:
    // Maps `path` and validates it (errors: io.open_failed, safetensors.*).
    static safetensors_file open(const std::string& path) {
        auto map = std::make_shared<const mapped_file>(path);
        const std::byte* data = map->data();
        const std::size_t size = map->size();
        safetensors_file f = parse(data, size, path, std::move(map));
        for (auto& r : f.records_) r.file_backed = true;
        return f;
    }

    // Validates an image already in memory. `source` names it in messages; `owner` keeps
    // [data, data + size) alive for as long as any record is used.
    static safetensors_file parse(const std::byte* data, std::size_t size, const std::string& source, std::shared_ptr<const void> owner) {
        safetensors_file f;
        f.path_ = source;
        const std::string& src = source;
        if (size < 8)
            throw error("safetensors.too_small",
                        src + ": file is " + std::to_string(size) + " bytes, too small for the 8-byte header length");
        std::uint64_t n = 0;
        for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint64_t>(data[i]);
        if (n > safetensors_max_header)
            throw error("safetensors.header_too_large",
                        src + ": header length " + std::to_string(n) + " exceeds the limit of " + std::to_string(safetensors_max_header) +
                            " bytes");
        if (n > size - 8)
            throw error("safetensors.header_out_of_bounds",
                        src + ": header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(size - 8) +
                            " bytes follow the length)");
        const std::string_view text(reinterpret_cast<const char*>(data + 8), static_cast<std::size_t>(n));
        const json header = parse_json(text, src, "safetensors", 8);
        if (!header.is_object())
            throw error("safetensors.header_not_object", src + ": header is a JSON " + json_type_name(header) + ", expected an object");

        const std::byte* buffer = data + 8 + n;
        const std::uint64_t buffer_size = size - 8 - n;

        struct span_t {
            std::uint64_t begin, end;
            std::size_t index;
        };
        std::vector<span_t> spans;
        for (const auto& item : header.items()) {  // not a structured binding: lambdas below use it (clang 14)
            const std::string& name = item.key();
            const json& entry = item.value();
            if (name == "__metadata__") {
                f.read_metadata(entry);
                continue;
            }
            const std::string tname = src + ": tensor '" + detail::printable(name) + "'";
            if (!entry.is_object())
                throw error("safetensors.entry_not_object",
                            tname + " is a JSON " + json_type_name(entry) + ", expected an object with dtype, shape and data_offsets");
            auto field = [&](const char* key, json::value_t want, const char* expected) -> const json& {
                const auto it = entry.find(key);
                if (it == entry.end()) throw error("safetensors.missing_field", tname + " has no '" + key + "'");
                const bool ok = want == json::value_t::string ? it->is_string() : it->is_array();
                if (!ok)
                    throw error("safetensors.field_type",
                                tname + " field '" + key + "' is a JSON " + json_type_name(*it) + ", expected " + expected);
                return *it;
            };
            const json& jd = field("dtype", json::value_t::string, "a string");
            const json& js = field("shape", json::value_t::array, "an array of non-negative integers");
            const json& jo = field("data_offsets", json::value_t::array, "an array of two non-negative integers");

            const auto& dname = jd.get_ref<const std::string&>();
            const auto t = dtype_from_safetensors_name(dname);
            if (!t)
                throw error("safetensors.unknown_dtype",
                            tname + " has unknown dtype '" + detail::printable(dname) + "' (expected one of " + detail::known_dtypes() +
                                ")");
            tensor_record r;
            r.name = name;
            r.type = *t;
            r.source = src;
            r.shape.reserve(js.size());
            for (std::size_t i = 0; i < js.size(); ++i) {
                const json& d = js[i];
                if (!d.is_number_unsigned() || d.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<index_t>::max()))
                    throw error("safetensors.bad_shape",
                                tname + " shape element " + std::to_string(i) + " is " + detail::describe_json(d) +
                                    ", expected a non-negative integer below 2^63");
                r.shape.push_back(static_cast<index_t>(d.get<std::uint64_t>()));
            }
            if (jo.size() != 2)
                throw error("safetensors.field_type",
                            tname + " field 'data_offsets' has " + std::to_string(jo.size()) + " elements, expected 2");
            for (std::size_t i = 0; i < 2; ++i)
                if (!jo[i].is_number_unsigned())
                    throw error("safetensors.bad_offsets",
                                tname + " data_offsets element " + std::to_string(i) + " is " + detail::describe_json(jo[i]) +
                                    ", expected a non-negative integer");
            const std::uint64_t b = jo[0].get<std::uint64_t>(), e = jo[1].get<std::uint64_t>();
            if (b > e)
                throw error("safetensors.offsets_reversed",
                            tname + " data_offsets " + detail::offsets_str(b, e) + " end before they begin");
            if (e > buffer_size)
                throw error("safetensors.offsets_out_of_bounds",
                            tname + " data_offsets " + detail::offsets_str(b, e) + " run past the end of the data buffer (" +
                                std::to_string(buffer_size) + " bytes)");
            std::uint64_t nbytes = 0;
            if (!detail::checked_size(r.shape, r.type, nbytes))
                throw error("safetensors.size_overflow",
                            tname + " shape " + r.shape.str() + " of " + dname + " has more than 2^63 elements or bytes");
            if (nbytes != e - b)
                throw error("safetensors.size_mismatch",
                            tname + " shape " + r.shape.str() + " of " + dname + " needs " + std::to_string(nbytes) +
                                " bytes but data_offsets " + detail::offsets_str(b, e) + " span " + std::to_string(e - b));
            r.bytes = buffer + b;
            r.nbytes = static_cast<std::size_t>(nbytes);
            r.owner = owner;
            spans.push_back({b, e, f.records_.size()});
            f.records_.push_back(std::move(r));
        }

        // The entries, sorted, must tile the data buffer exactly.
        std::sort(spans.begin(), spans.end(),
                  [](const span_t& x, const span_t& y) { return x.begin != y.begin ? x.begin < y.begin : x.end < y.end; });
        std::uint64_t covered = 0;
        const span_t* prev = nullptr;
        for (const span_t& s : spans) {
            if (s.begin < covered)
                throw error("safetensors.offsets_overlap",
                            src + ": tensor '" + detail::printable(f.records_[s.index].name) + "' data_offsets " +
                                detail::offsets_str(s.begin, s.end) + " overlap tensor '" +
                                detail::printable(f.records_[prev->index].name) + "' (data_offsets " +
                                detail::offsets_str(prev->begin, prev->end) + ")");
            if (s.begin > covered)
                throw error("safetensors.data_hole",
                            src + ": data buffer bytes [" + std::to_string(covered) + ", " + std::to_string(s.begin) +
                                ") belong to no tensor");
            covered = s.end;
            prev = &s;
        }
        if (covered != buffer_size)
            throw error("safetensors.data_hole",
                        src + ": data buffer bytes [" + std::to_string(covered) + ", " + std::to_string(buffer_size) +
                            ") belong to no tensor");

        // Records in data order; names indexed for lookup.
        std::vector<tensor_record> ordered;
        ordered.reserve(spans.size());
        for (const span_t& s : spans) ordered.push_back(std::move(f.records_[s.index]));
        f.records_ = std::move(ordered);
        for (std::size_t i = 0; i < f.records_.size(); ++i) f.index_.emplace(f.records_[i].name, i);
        return f;
    }

    const std::string& path() const noexcept { return path_; }
    // Every tensor, in the order of its data in the file.
    const std::vector<tensor_record>& records() const noexcept { return records_; }
    // The "__metadata__" object (empty when absent).
    const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }
    // The record named `name`, or nullptr.
    const tensor_record* find(std::string_view name) const {
        const auto it = index_.find(name);
        return it == index_.end() ? nullptr : &records_[it->second];
    }
    // Moves the records out (the file object is left empty).
    std::vector<tensor_record> take_records() && {
        index_.clear();
        return std::move(records_);
    }

private:
    void read_metadata(const json& m) {
        if (!m.is_object())
            throw error("safetensors.metadata_invalid",
                        path_ + ": __metadata__ is a JSON " + json_type_name(m) + ", expected an object of strings");
        for (const auto& [k, v] : m.items()) {
            if (!v.is_string())
                throw error("safetensors.metadata_invalid",
                            path_ + ": __metadata__ entry '" + detail::printable(k) + "' is a JSON " + json_type_name(v) +
                                ", expected a string");
            metadata_.emplace(k, v.get<std::string>());
        }
    }

    std::string path_;
    std::vector<tensor_record> records_;
    std::map<std::string, std::size_t, std::less<>> index_;
    std::map<std::string, std::string> metadata_;
};

// All tensors of one safetensors file, in data order.
inline std::vector<tensor_record> read_safetensors(const std::string& path) { return safetensors_file::open(path).take_records(); }

// ---- writer --------------------------------------------------------------------------------

class safetensors_writer {
public:
    // `float_type` is how add(name, view<const float>) stores values: F32 (default), F16 or
    // BF16 (both rounded to nearest even; F16 overflows to inf beyond 65504).
    explicit safetensors_writer(dtype float_type = dtype::f32) : float_type_(float_type) {
        if (float_type != dtype::f32 && float_type != dtype::f16 && float_type != dtype::bf16)
            throw error("safetensors.writer_float_type",
                        "safetensors_writer: float storage type " + std::string(safetensors_name(float_type)) + " is not F32, F16 or BF16");
    }

    // A float32 tensor, stored as the writer's float type.
    void add(const std::string& name, view<const float> v) {
        check_new(name, dtype::f32, v.shape);
        const auto n = static_cast<std::size_t>(v.numel());
        std::vector<std::byte> bytes(n * size_of(float_type_));
        if (float_type_ == dtype::f32) {
            if (n) std::memcpy(bytes.data(), v.data, n * 4);
        } else {
            for (std::size_t i = 0; i < n; ++i) {
                const std::uint16_t h = float_type_ == dtype::f16 ? float_to_f16(v.data[i]) : float_to_bf16(v.data[i]);
                std::memcpy(bytes.data() + 2 * i, &h, 2);
            }
        }
        entries_.push_back({name, float_type_, v.shape, std::move(bytes)});
    }

    // A float32 tensor stored as F32 without a copy: v must stay valid until write() or
    // serialize() returns. (Outputs of gigabytes: the encoder states of a whole book.)
    void add_borrowed(const std::string& name, view<const float> v) {
        if (float_type_ != dtype::f32) {
            add(name, v);
            return;
        }
        check_new(name, dtype::f32, v.shape);
        entry e{name, dtype::f32, v.shape, {}, reinterpret_cast<const std::byte*>(v.data), static_cast<std::size_t>(v.numel()) * 4};
        entries_.push_back(std::move(e));
    }

    // Raw little-endian bytes of any dtype; their count must be shape x dtype size.
    void add(const std::string& name, dtype t, shape_t shape, std::span<const std::byte> bytes) {
        check_new(name, t, shape);
        const auto need = static_cast<std::size_t>(shape.numel()) * size_of(t);
        if (bytes.size() != need)
            throw error("safetensors.writer_size_mismatch",
                        "safetensors_writer: tensor '" + name + "' shape " + shape.str() + " of " + std::string(safetensors_name(t)) +
                            " needs " + std::to_string(need) + " bytes, got " + std::to_string(bytes.size()));
        entries_.push_back({name, t, std::move(shape), std::vector<std::byte>(bytes.begin(), bytes.end())});
    }

    // int64 values (token ids in reference files).
    void add_i64(const std::string& name, shape_t shape, const std::int64_t* data) {
        const auto n = static_cast<std::size_t>(shape.numel() > 0 ? shape.numel() : 0);
        add(name, dtype::i64, std::move(shape), std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), n * 8));
    }

    // "__metadata__": string keys to string values (written only when not empty).
    std::map<std::string, std::string> metadata;

    // The whole file image.
    std::string serialize() const {
        std::string out = header_image();
        for (const auto& e : entries_) out.append(reinterpret_cast<const char*>(e.data()), e.size());
        return out;
    }

private:
    // The 8-byte length and the padded JSON header.
    std::string header_image() const {
        std::string header = "{";
        bool first = true;
        auto sep = [&] {
            if (!first) header += ',';
            first = false;
        };
        if (!metadata.empty()) {
            sep();
            header += "\"__metadata__\":{";
            bool mfirst = true;
            for (const auto& [k, v] : metadata) {
                if (!mfirst) header += ',';
                mfirst = false;
                header += quote(k, "metadata key");
                header += ':';
                header += quote(v, "metadata value");
            }
            header += '}';
        }
        std::uint64_t offset = 0;
        for (const auto& e : entries_) {
            sep();
            // Appended piece by piece: GCC 12 -O3 warns (-Wrestrict, a false positive) on long
            // chains of std::string operator+.
            header += quote(e.name, "tensor name");
            header += ":{\"dtype\":\"";
            header += safetensors_name(e.type);
            header += "\",\"shape\":[";
            for (std::size_t i = 0; i < e.shape.size(); ++i) {
                if (i) header += ',';
                header += std::to_string(e.shape[i]);
            }
            header += "],\"data_offsets\":[";
            header += std::to_string(offset);
            header += ',';
            header += std::to_string(offset + e.size());
            header += "]}";
            offset += e.size();
        }
        header += '}';
        header.append((8 - header.size() % 8) % 8, ' ');
        std::string out;
        const std::uint64_t n = header.size();
        for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xffu);
        out += header;
        return out;
    }

public:
    // Writes `path` atomically (io::atomic_file: a temporary beside it, fsync'ed, then renamed),
    // streaming the tensors (no file image in memory). Error: io.write_failed, and nothing at
    // `path` changes. Where the path may be is the caller's check (check_output_path).
    void write(const std::string& path) const {
        const std::string head = header_image();
        atomic_file f(path);
        f.write(head);
        for (const auto& e : entries_)
            if (e.size() > 0) f.write(e.data(), e.size());
        f.commit();
    }

private:
    struct entry {
        std::string name;
        dtype type;
        shape_t shape;
        std::vector<std::byte> bytes;         // owned copy, or
        const std::byte* borrowed = nullptr;  // the caller's bytes (add_borrowed)
        std::size_t borrowed_size = 0;
        const std::byte* data() const { return borrowed ? borrowed : bytes.data(); }
        std::size_t size() const { return borrowed ? borrowed_size : bytes.size(); }
    };

    // s as a JSON string. JSON text is UTF-8, so a name or metadata string must be well-formed.
    static std::string quote(const std::string& s, const char* what) {
        if (!is_valid_utf8(s))
            throw error("safetensors.writer_bad_name",
                        "safetensors_writer: " + std::string(what) + " '" + detail::printable(s) + "' is not valid UTF-8");
        return json(s).dump();
    }

    void check_new(const std::string& name, dtype t, const shape_t& shape) {
        if (name.empty() || name == "__metadata__")
            throw error("safetensors.writer_bad_name", "safetensors_writer: tensor name '" + name + "' is reserved or empty");
        quote(name, "tensor name");
        for (const auto& e : entries_)
            if (e.name == name) throw error("safetensors.writer_duplicate", "safetensors_writer: tensor '" + name + "' added twice");
        std::uint64_t nbytes = 0;
        const bool negative = std::any_of(shape.begin(), shape.end(), [](index_t d) { return d < 0; });
        if (negative || !detail::checked_size(shape, t, nbytes))
            throw error("safetensors.writer_bad_shape", "safetensors_writer: tensor '" + name + "' has invalid shape " + shape.str());
    }

    dtype float_type_;
    std::vector<entry> entries_;
};

// ---- sharded checkpoints -------------------------------------------------------------------
//
// model.safetensors.index.json is {"metadata": {...}, "weight_map": {tensor: shard file}}.
// Rules (errors index.*): weight_map is a non-empty object of strings; each shard name is a
// plain file name in the index's directory (no '/', '\', "." or "..", no control characters,
// so nothing outside the checkpoint directory is ever opened); every listed tensor is in the
// shard that lists it; and a shard holds no tensor that weight_map does not assign to it
// (strict: a stray tensor means the index and the shards disagree, so neither can be trusted).
// "metadata", when present, must be an object; its content (e.g. total_size) is not checked.

struct safetensors_index {
    std::map<std::string, std::string> weight_map;  // tensor -> shard file name
    std::vector<std::string> shards;                // distinct shard file names, sorted
};

inline safetensors_index parse_safetensors_index(std::string_view text, const std::string& source) {
    const json j = parse_json(text, source, "index");
    if (!j.is_object())
        throw error("index.not_object", source + ": index is a JSON " + json_type_name(j) + ", expected an object with \"weight_map\"");
    if (const auto m = j.find("metadata"); m != j.end() && !m->is_object())
        throw error("index.field_type", source + ": \"metadata\" is a JSON " + json_type_name(*m) + ", expected an object");
    const auto wm = j.find("weight_map");
    if (wm == j.end()) throw error("index.missing_weight_map", source + ": no \"weight_map\"");
    if (!wm->is_object())
        throw error("index.field_type",
                    source + ": \"weight_map\" is a JSON " + json_type_name(*wm) +
                        ", expected an object mapping tensor names to shard file names");
    if (wm->empty()) throw error("index.empty", source + ": \"weight_map\" lists no tensors");
    safetensors_index idx;
    std::set<std::string> shards;
    for (const auto& [name, shard] : wm->items()) {
        if (!shard.is_string())
            throw error("index.field_type",
                        source + ": weight_map entry '" + detail::printable(name) + "' is a JSON " + json_type_name(shard) +
                            ", expected a shard file name");
        const auto& s = shard.get_ref<const std::string&>();
        const bool bad = s.empty() || s == "." || s == ".." ||
            std::any_of(s.begin(), s.end(), [](char c) { return c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20; });
        if (bad)
            throw error("index.bad_shard_name",
                        source + ": shard '" + detail::printable(s) + "' of tensor '" + detail::printable(name) +
                            "' is not a plain file name in the checkpoint directory");
        idx.weight_map.emplace(name, s);
        shards.insert(s);
    }
    idx.shards.assign(shards.begin(), shards.end());
    return idx;
}

// Reads every shard listed by the index at `index_path` (shards live in the same directory).
// Records come shard by shard (shard names sorted), each shard in data order.
inline std::vector<tensor_record> read_sharded_safetensors(const std::string& index_path) {
    const safetensors_index idx = parse_safetensors_index(read_text_file(index_path), index_path);
    const std::filesystem::path dir = std::filesystem::path(index_path).parent_path();
    const directory_files files(dir.empty() ? std::string(".") : dir.string());
    std::vector<tensor_record> out;
    std::set<std::string> found;
    for (const std::string& shard : idx.shards) {
        auto file = safetensors_file::open(
            files.require(shard, "io.open_failed", (dir / shard).string() + ": cannot open (No such file or directory)"));
        for (const tensor_record& r : file.records()) {
            const auto it = idx.weight_map.find(r.name);
            if (it == idx.weight_map.end())
                throw error("index.unlisted_tensor",
                            index_path + ": shard '" + detail::printable(shard) + "' holds tensor '" + detail::printable(r.name) +
                                "', which weight_map does not list");
            if (it->second != shard)
                throw error("index.wrong_shard",
                            index_path + ": shard '" + detail::printable(shard) + "' holds tensor '" + detail::printable(r.name) +
                                "', which weight_map assigns to '" + it->second + "'");
            found.insert(r.name);
        }
        auto recs = std::move(file).take_records();
        for (auto& r : recs) out.push_back(std::move(r));
    }
    for (const auto& [name, shard] : idx.weight_map)
        if (!found.count(name))
            throw error("index.tensor_not_in_shard",
                        index_path + ": tensor '" + detail::printable(name) + "' is listed in shard '" + detail::printable(shard) +
                            "' but that shard does not hold it");
    return out;
}

}  // namespace locost::io
