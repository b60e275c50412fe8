// PyTorch pytorch_model.bin: the zip archive torch.save writes (torch >= 1.6), read natively
// and without running any of it.
//
// Format. A zip archive of stored (uncompressed) entries under one top-level folder, whose
// name varies ("archive", or the stem of the file name):
//   <folder>/data.pkl        a pickle (protocol 2 by default) of the saved object
//   <folder>/data/<key>      the raw little-endian bytes of one storage
//   <folder>/version         "3", ignored;  <folder>/byteorder  "little" (torch >= 2.1)
//   <folder>/.data/...       serialization id (torch >= 2.1), ignored
// In the pickle each tensor is REDUCE(torch._utils._rebuild_tensor_v2, (storage,
// storage_offset, size, stride, requires_grad, backward_hooks[, metadata])) and each storage a
// persistent id ('storage', torch.FloatStorage, key, location, numel) naming <folder>/data/<key>.
// Tensors that share a storage (tied weights, views) name the same key.
//
// Three files, one concern each: zip.hpp reads and validates the archive, pickle.hpp runs the
// restricted unpickler over data.pkl, and this header maps the state dict it builds (storages and
// tensors) onto tensor_records.
//
// Design
//  * The file is mapped once (mapped_file). A tensor that is a contiguous view of its storage
//    points into the mapping; any other view (a transpose, a column slice) is copied to a
//    contiguous buffer owned by its record. Copies may total at most the file size, so that a
//    small file cannot ask for a huge allocation (e.g. a stride-0 expansion to 10^12 elements).
//  * Root: a dict (or OrderedDict) of str -> tensor, as state_dict() returns it; its
//    attributes (the _metadata that BUILD sets) are ignored. A root dict with a "state_dict"
//    entry that is itself a dict (PyTorch Lightning and training-script checkpoints) is read
//    through that entry; the root's other entries are then ignored, but must still unpickle.
//  * Dtypes: Float, Half, BFloat16 storages become F32, F16, BF16, and Double, Long, Int, Short,
//    Char, Byte, Bool storages F64, I64, I32, I16, I8, U8, BOOL, exactly as the safetensors
//    reader accepts every dtype locost knows: a state dict may hold integer buffers the model
//    does not read, and the checkpoint loader is the one that insists on float weights. Other
//    storage types (complex, quantized, untyped) are refused by name (pytorch.unsupported_dtype).
//  * Tensors: sizes, strides and the storage offset must be non-negative; the element count and
//    byte size must fit in int64; every element addressed must lie inside the storage; the
//    storage record must hold exactly numel x element size bytes; a key used by several
//    tensors must always carry the same storage type and numel.
//  * The legacy format (torch < 1.6: a bare pickle stream, starting with the pickle PROTO
//    opcode) is refused with advice (pytorch.legacy_format); so is a big-endian byteorder.
//  * Every error is a locost::error whose message starts with the file path; pickle errors give
//    the byte offset in data.pkl, tensor errors the tensor's name (docs/errors.md).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "../config/error.hpp"
#include "../core/dtype.hpp"
#include "../core/tensor.hpp"
#include "json.hpp"  // detail::printable
#include "mapped_file.hpp"
#include "pickle.hpp"
#include "tensor_record.hpp"
#include "zip.hpp"

namespace locost::io {

namespace detail {

// The dtype of a torch storage type ("FloatStorage"), if locost reads it.
inline std::optional<dtype> torch_storage_dtype(std::string_view type) noexcept {
    static constexpr std::pair<std::string_view, dtype> table[] = {
        {"FloatStorage", dtype::f32}, {"HalfStorage", dtype::f16},    {"BFloat16Storage", dtype::bf16}, {"DoubleStorage", dtype::f64},
        {"LongStorage", dtype::i64},  {"IntStorage", dtype::i32},     {"ShortStorage", dtype::i16},     {"CharStorage", dtype::i8},
        {"ByteStorage", dtype::u8},   {"BoolStorage", dtype::boolean}};
    for (const auto& [name, t] : table)
        if (name == type) return t;
    return std::nullopt;
}

}  // namespace detail

// All tensors of a torch.save image in memory, in the order of the state dict. `source` names
// it in messages; `owner` keeps [data, data + size) alive for as long as any record is used
// (records that point into the image share it; copied views own their copy).
inline std::vector<tensor_record> read_pytorch_bin_buffer(const std::byte* data, std::size_t size, const std::string& source,
                                                          std::shared_ptr<const void> owner) {
    namespace zip = detail::zip;
    namespace pk = detail::pickle;
    const std::string& src = source;
    if (size >= 2 && static_cast<unsigned char>(data[0]) == 0x80 && static_cast<unsigned char>(data[1]) <= 5)
        throw error("pytorch.legacy_format",
                    src +
                        ": legacy torch.save format (a bare pickle, torch < 1.6), which locost does not read; re-save it "
                        "with torch >= 1.6 (torch.save(torch.load(f), f)) or convert it to safetensors");
    const std::vector<zip::entry> entries = zip::read_directory(data, size, src);
    std::unordered_map<std::string_view, const zip::entry*> by_name;
    for (const auto& e : entries) by_name.emplace(e.name, &e);

    // <folder>/data.pkl, in the one top-level folder.
    const zip::entry* pkl = nullptr;
    for (const auto& e : entries) {
        const auto slash = e.name.find('/');
        if (slash == 0 || slash == std::string::npos || e.name.compare(slash, std::string::npos, "/data.pkl") != 0) continue;
        if (pkl)
            throw error("pytorch.ambiguous_archive",
                        src + ": the archive holds both '" + detail::printable(pkl->name) + "' and '" + detail::printable(e.name) +
                            "' (expected one top-level folder with one data.pkl)");
        pkl = &e;
    }
    if (!pkl)
        throw error("pytorch.missing_data_pkl",
                    src + ": the zip archive has no <folder>/data.pkl entry (" + std::to_string(entries.size()) +
                        " entries); expected a torch.save file");
    const std::string folder = pkl->name.substr(0, pkl->name.size() - 8);  // "<folder>/"
    if (const auto it = by_name.find(folder + "byteorder"); it != by_name.end()) {
        const zip::entry& e = *it->second;
        const auto* b = reinterpret_cast<const char*>(zip::stored_data(data, e, src));
        const std::string_view order(b, static_cast<std::size_t>(e.usize));
        if (order != "little")
            throw error("pytorch.unsupported_byteorder",
                        src + ": '" + detail::printable(e.name) + "' says '" + detail::printable(order) +
                            "'; locost reads only little-endian checkpoints");
    }

    if (pkl->usize > pk::max_pickle)
        throw error("pytorch.pickle_too_large",
                    src + ": '" + detail::printable(pkl->name) + "' is " + std::to_string(pkl->usize) + " bytes, beyond the limit of " +
                        std::to_string(pk::max_pickle) + " for a state dict's pickle");
    pk::unpickler u(zip::stored_data(data, *pkl, src), static_cast<std::size_t>(pkl->usize), src + ": " + detail::printable(pkl->name));
    const pk::object* root = &u.obj(u.run());
    if (root->k != pk::kind::dict)
        throw error("pytorch.root_not_dict",
                    src + ": the pickled object is " + pk::describe(*root) + ", expected a dict of tensor names to tensors (a state_dict)");
    for (std::size_t i = 0; i + 1 < root->items.size(); i += 2) {
        const pk::object& k = u.obj(root->items[i]);
        const pk::object& v = u.obj(root->items[i + 1]);
        if (k.k == pk::kind::string && k.s == "state_dict" && v.k == pk::kind::dict) {
            root = &v;
            break;
        }
    }

    struct resolved_storage {
        std::string_view type_name;  // "FloatStorage"
        std::int64_t numel;
        const std::byte* bytes;
        dtype type;
    };
    std::unordered_map<std::string_view, resolved_storage> storages;                          // by key
    std::unordered_map<std::uint32_t, std::shared_ptr<const std::vector<std::byte>>> copies;  // per tensor object
    std::uint64_t copied = 0;
    std::unordered_set<std::string_view> names;
    std::vector<tensor_record> out;
    out.reserve(root->items.size() / 2);
    for (std::size_t i = 0; i + 1 < root->items.size(); i += 2) {
        const pk::object& k = u.obj(root->items[i]);
        const pk::object& v = u.obj(root->items[i + 1]);
        if (k.k != pk::kind::string)
            throw error("pytorch.key_not_string",
                        src + ": state dict entry " + std::to_string(i / 2) + " has " + pk::describe(k) + " as its key, expected a str");
        const std::string tname = src + ": tensor '" + detail::printable(k.s) + "'";
        if (!names.insert(k.s).second) throw error("pytorch.duplicate_key", tname + " appears more than once in the state dict");
        if (v.k != pk::kind::tensor) throw error("pytorch.not_a_tensor", tname + " is " + pk::describe(v) + ", expected a tensor");
        const pk::tensor& t = u.tensors()[static_cast<std::size_t>(v.i)];
        const pk::storage& s = u.storages()[t.storage];
        const std::string& skey = u.obj(s.key).s;
        const std::string stype = u.obj(s.type).s.substr(6);  // after "torch."
        const std::size_t rank = u.obj(t.size).items.size();
        std::int64_t size_of_dim[pk::max_rank], stride_of_dim[pk::max_rank];
        for (std::size_t d = 0; d < rank; ++d) {
            size_of_dim[d] = u.obj(u.obj(t.size).items[d]).i;
            stride_of_dim[d] = u.obj(u.obj(t.stride).items[d]).i;
        }
        const std::span<const std::int64_t> sizes(size_of_dim, rank), strides(stride_of_dim, rank);

        // The storage: a known dtype, a stored record of exactly numel elements, one meaning per key.
        const auto st_type = detail::torch_storage_dtype(stype);
        if (!st_type)
            throw error("pytorch.unsupported_dtype",
                        tname + " is stored as torch." + detail::printable(stype) +
                            ", which locost does not read (expected Float, Half, BFloat16, Double, Long, Int, Short, "
                            "Char, Byte or Bool storage)");
        auto sit = storages.find(skey);
        if (sit == storages.end()) {
            const auto rit = by_name.find(folder + "data/" + skey);
            if (rit == by_name.end())
                throw error("pytorch.missing_storage",
                            tname + " uses storage '" + detail::printable(skey) + "', but the archive has no entry '" +
                                detail::printable(folder + "data/" + skey) + "'");
            const zip::entry& rec = *rit->second;
            const std::byte* bytes = zip::stored_data(data, rec, src);
            std::uint64_t need = 0;
            const bool too_big =
                __builtin_mul_overflow(static_cast<std::uint64_t>(s.numel), static_cast<std::uint64_t>(size_of(*st_type)), &need);
            if (too_big || need != rec.usize)
                throw error("pytorch.storage_size_mismatch",
                            tname + ": storage '" + detail::printable(skey) + "' of " + std::to_string(s.numel) + " elements of torch." +
                                stype + " needs " + (too_big ? "over 2^64" : std::to_string(need)) + " bytes, but '" +
                                detail::printable(rec.name) + "' holds " + std::to_string(rec.usize));
            sit = storages.emplace(skey, resolved_storage{u.obj(s.type).s, s.numel, bytes, *st_type}).first;
            sit->second.type_name.remove_prefix(6);
        } else if (sit->second.type_name != stype || sit->second.numel != s.numel) {
            throw error("pytorch.storage_conflict",
                        tname + " uses storage '" + detail::printable(skey) + "' as " + std::to_string(s.numel) + " elements of torch." +
                            stype + ", but another tensor uses it as " + std::to_string(sit->second.numel) + " elements of torch." +
                            std::string(sit->second.type_name));
        }
        const resolved_storage& rs = sit->second;
        const std::uint64_t esize = size_of(rs.type);

        // The view: non-negative geometry, a size that fits, every element inside the storage.
        tensor_record r;
        r.name = k.s;
        r.type = rs.type;
        r.source = src;
        r.shape.assign(sizes.begin(), sizes.end());
        if (t.offset < 0) throw error("pytorch.bad_tensor", tname + " has storage offset " + std::to_string(t.offset) + ", expected >= 0");
        for (std::size_t d = 0; d < rank; ++d) {
            if (sizes[d] < 0)
                throw error("pytorch.bad_tensor",
                            tname + " has size " + std::to_string(sizes[d]) + " in dimension " + std::to_string(d) + " (shape " +
                                r.shape.str() + "), expected >= 0");
            if (strides[d] < 0)
                throw error("pytorch.bad_tensor",
                            tname + " has stride " + std::to_string(strides[d]) + " in dimension " + std::to_string(d) + ", expected >= 0");
        }
        constexpr std::uint64_t max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
        std::uint64_t numel = 1, nbytes = 0;
        for (const std::int64_t n : sizes)
            if (__builtin_mul_overflow(numel, static_cast<std::uint64_t>(n), &numel) || numel > max)
                throw error("pytorch.size_overflow", tname + " shape " + r.shape.str() + " has more than 2^63 elements");
        if (__builtin_mul_overflow(numel, esize, &nbytes) || nbytes > max)
            throw error("pytorch.size_overflow", tname + " shape " + r.shape.str() + " has more than 2^63 bytes");
        r.nbytes = static_cast<std::size_t>(nbytes);
        r.owner = owner;
        r.bytes = rs.bytes;
        if (numel == 0) {
            out.push_back(std::move(r));
            continue;
        }
        std::uint64_t last = static_cast<std::uint64_t>(t.offset);  // highest element addressed
        bool overflow = false;
        for (std::size_t d = 0; d < rank; ++d) {
            std::uint64_t reach = 0;
            overflow |= __builtin_mul_overflow(static_cast<std::uint64_t>(sizes[d] - 1), static_cast<std::uint64_t>(strides[d]), &reach);
            overflow |= __builtin_add_overflow(last, reach, &last);
        }
        if (overflow || last >= static_cast<std::uint64_t>(s.numel)) {
            const shape_t stride_shape(strides.begin(), strides.end());  // printed like a shape
            throw error("pytorch.tensor_out_of_bounds",
                        tname + " (shape " + r.shape.str() + ", stride " + stride_shape.str() + ", storage offset " +
                            std::to_string(t.offset) + ") reaches element " + (overflow ? "beyond 2^64" : std::to_string(last)) +
                            " of storage '" + detail::printable(skey) + "', which holds " + std::to_string(s.numel));
        }
        bool contiguous = true;
        std::uint64_t expect = 1;
        for (std::size_t d = rank; d-- > 0;) {
            if (sizes[d] != 1 && static_cast<std::uint64_t>(strides[d]) != expect) contiguous = false;
            expect *= static_cast<std::uint64_t>(sizes[d]);
        }
        if (contiguous) {
            r.bytes = rs.bytes + static_cast<std::uint64_t>(t.offset) * esize;
            out.push_back(std::move(r));
            continue;
        }
        // A strided view: gather it once per tensor object (tied names share the copy).
        const auto tensor_index = static_cast<std::uint32_t>(v.i);
        auto cit = copies.find(tensor_index);
        if (cit == copies.end()) {
            if (nbytes > size - std::min<std::uint64_t>(copied, size))
                throw error("pytorch.copy_limit",
                            tname + " is a strided view that needs a " + std::to_string(nbytes) +
                                "-byte contiguous copy, beyond the limit of the file size (" + std::to_string(size) +
                                " bytes) for all copies together");
            copied += nbytes;
            auto buf = std::make_shared<std::vector<std::byte>>(static_cast<std::size_t>(nbytes));
            std::int64_t idx[pk::max_rank] = {};
            std::byte* dst = buf->data();
            const std::int64_t inner = sizes[rank - 1], inner_stride = strides[rank - 1];
            for (std::uint64_t done = 0; done < numel; done += static_cast<std::uint64_t>(inner)) {
                std::uint64_t base = static_cast<std::uint64_t>(t.offset);
                for (std::size_t d = 0; d + 1 < rank; ++d) base += static_cast<std::uint64_t>(idx[d] * strides[d]);
                for (std::int64_t j = 0; j < inner; ++j) {
                    std::memcpy(dst, rs.bytes + (base + static_cast<std::uint64_t>(j * inner_stride)) * esize, esize);
                    dst += esize;
                }
                for (std::size_t d = rank - 1; d-- > 0;) {  // odometer over the outer dimensions
                    if (++idx[d] < sizes[d]) break;
                    idx[d] = 0;
                }
            }
            cit = copies.emplace(tensor_index, std::move(buf)).first;
        }
        r.bytes = cit->second->data();
        r.owner = cit->second;
        out.push_back(std::move(r));
    }
    return out;
}

// All tensors of the torch.save file at `path` (pytorch_model.bin), mapped, in state dict order.
// Errors: io.open_failed, zip.*, pytorch.*.
inline std::vector<tensor_record> read_pytorch_bin(const std::string& path) {
    auto map = std::make_shared<const mapped_file>(path);
    const std::byte* data = map->data();
    const std::size_t size = map->size();
    auto records = read_pytorch_bin_buffer(data, size, path, std::move(map));
    for (auto& r : records) r.file_backed = r.bytes >= data && r.bytes + r.nbytes <= data + size;
    return records;
}

}  // namespace locost::io
