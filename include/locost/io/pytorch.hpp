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
// Design
//  * The file is mapped once (mapped_file). A tensor that is a contiguous view of its storage
//    points into the mapping; any other view (a transpose, a column slice) is copied to a
//    contiguous buffer owned by its record. Copies may total at most the file size, so that a
//    small file cannot ask for a huge allocation (e.g. a stride-0 expansion to 10^12 elements).
//  * Zip: the end of central directory record is searched backwards over at most its maximal
//    extent (22 + 65535 bytes of comment); ZIP64 (locator, record, extra fields) is read, and
//    the 32-bit fields must agree with it unless they hold the all-ones marker. Every offset and
//    size is checked against the file with overflow-safe arithmetic; the entry count is bounded
//    by what the central directory's size can hold before anything is allocated; each local
//    header must agree with the central directory (signature, name, method, sizes; a size of 0
//    is accepted when bit 3 says a data descriptor follows, as torch's writer does); entries lie
//    before the central directory and do not overlap; names are unique. Compressed or encrypted
//    entries are refused when read (torch.save never compresses; re-zipping a checkpoint does).
//    CRCs are not verified: that would read every byte of gigabytes of weights at open time,
//    while everything that decides which bytes are read is validated.
//  * Pickle: a restricted unpickler that knows only the opcodes torch.save emits for a state
//    dict (protocols 2 to 5) and only these globals: collections.OrderedDict,
//    torch._utils._rebuild_tensor_v2, _rebuild_tensor and _rebuild_parameter, and torch.<X>Storage
//    type tags. It builds plain values; nothing is ever called or imported. Any other opcode or
//    global is an error naming it (pytorch.unsupported_opcode, pytorch.unsupported_global), so
//    `os.system` and torch.storage._load_from_bytes are refused when they are named, before any
//    REDUCE. Objects live in one arena addressed by index (cycles built with the memo cannot
//    leak or recurse); nothing is ever traversed recursively. Memory and time stay O(pickle
//    size): every opcode creates at most one object; what the memo lets a pickle reuse (tuples,
//    strings) is referenced, never copied; an opcode's work is bounded before any copy (tensor
//    rank <= 64, at most 7 arguments, storage keys <= 256 bytes, data.pkl <= 1 GiB). Stack,
//    mark and memo underflow, wrong types, truncation and invalid UTF-8 are errors, never
//    crashes.
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
//    the byte offset in data.pkl, tensor errors the tensor's name (README error table).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
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
#include "../core/utf8.hpp"
#include "json.hpp"
#include "mapped_file.hpp"
#include "tensor_record.hpp"

namespace locost::io {

namespace detail::zip {

inline std::uint16_t le16(const std::byte* p) noexcept {
    return static_cast<std::uint16_t>(static_cast<unsigned>(p[0]) | static_cast<unsigned>(p[1]) << 8);
}
inline std::uint32_t le32(const std::byte* p) noexcept {
    return static_cast<std::uint32_t>(le16(p)) | static_cast<std::uint32_t>(le16(p + 2)) << 16;
}
inline std::uint64_t le64(const std::byte* p) noexcept {
    return static_cast<std::uint64_t>(le32(p)) | static_cast<std::uint64_t>(le32(p + 4)) << 32;
}

inline constexpr std::uint32_t sig_local = 0x04034b50, sig_central = 0x02014b50, sig_end = 0x06054b50,
                               sig_end64 = 0x06064b50, sig_locator64 = 0x07064b50;
inline constexpr std::uint64_t end_size = 22, central_size = 46, local_size = 30, end64_size = 56,
                               locator64_size = 20;
inline constexpr std::uint64_t max_end_search = end_size + 0xffff;  // the record plus the longest comment
inline constexpr std::uint32_t all_ones32 = 0xffffffffu;

struct entry {
    std::string name;
    std::uint16_t flags = 0, method = 0;
    std::uint64_t csize = 0, usize = 0;
    std::uint64_t header = 0;  // local header offset
    std::uint64_t data = 0;    // first byte of the data
};

inline std::string str(std::uint64_t v) { return std::to_string(v); }

// The central directory of the zip image [d, d + size), every entry's local header checked.
inline std::vector<entry> read_directory(const std::byte* d, std::uint64_t size, const std::string& src) {
    // End of central directory record: the last signature whose comment ends the file.
    std::uint64_t eocd = 0;
    bool found = false;
    if (size >= end_size) {
        const std::uint64_t lowest = size > max_end_search ? size - max_end_search : 0;
        for (std::uint64_t p = size - end_size;; --p) {
            if (le32(d + p) == sig_end && p + end_size + le16(d + p + 20) == size) {
                eocd = p;
                found = true;
                break;
            }
            if (p == lowest) break;
        }
    }
    if (!found)
        throw error("zip.no_end_record", src + ": no zip end of central directory record (expected a torch.save "
                                               "file, a zip archive since torch 1.6; the file may be truncated)");
    std::uint64_t disk = le16(d + eocd + 4), cd_disk = le16(d + eocd + 6), n_disk = le16(d + eocd + 8),
                  n = le16(d + eocd + 10), cd_size = le32(d + eocd + 12), cd_off = le32(d + eocd + 16);
    std::uint64_t records_begin = eocd;  // the central directory must end before this

    if (eocd >= locator64_size && le32(d + eocd - locator64_size) == sig_locator64) {
        const std::uint64_t loc = eocd - locator64_size;
        const std::uint32_t loc_disk = le32(d + loc + 4), disks = le32(d + loc + 16);
        const std::uint64_t rec = le64(d + loc + 8);
        if (loc_disk != 0 || disks > 1)
            throw error("zip.multi_disk", src + ": the ZIP64 locator describes " + str(disks) +
                                              " disks; expected a single-file archive");
        if (rec > loc || loc - rec < end64_size)
            throw error("zip.zip64_invalid", src + ": the ZIP64 locator points to byte " + str(rec) +
                                                 ", which leaves no room for the 56-byte ZIP64 end of central "
                                                 "directory record before the locator at byte " + str(loc));
        if (le32(d + rec) != sig_end64)
            throw error("zip.zip64_invalid",
                        src + ": no ZIP64 end of central directory record at byte " + str(rec) + " (bad signature)");
        const std::uint64_t rec_size = le64(d + rec + 4);
        if (rec_size < end64_size - 12 || rec_size > loc - rec - 12)
            throw error("zip.zip64_invalid", src + ": the ZIP64 end of central directory record at byte " + str(rec) +
                                                 " gives its size as " + str(rec_size) + " (expected 44 to " +
                                                 str(loc - rec - 12) + ")");
        const std::uint64_t disk64 = le32(d + rec + 16), cd_disk64 = le32(d + rec + 20), n_disk64 = le64(d + rec + 24),
                            n64 = le64(d + rec + 32), cd_size64 = le64(d + rec + 40), cd_off64 = le64(d + rec + 48);
        // A 32-bit field holds either the value itself or the all-ones ZIP64 marker.
        auto agree = [&](const char* what, std::uint64_t v, std::uint64_t marker, std::uint64_t v64) {
            if (v != marker && v != v64)
                throw error("zip.zip64_mismatch", src + ": " + what + " is " + str(v) +
                                                      " in the end of central directory record but " + str(v64) +
                                                      " in the ZIP64 record");
            return v64;
        };
        disk = agree("the disk number", disk, 0xffff, disk64);
        cd_disk = agree("the central directory's disk", cd_disk, 0xffff, cd_disk64);
        n_disk = agree("the entry count on this disk", n_disk, 0xffff, n_disk64);
        n = agree("the entry count", n, 0xffff, n64);
        cd_size = agree("the central directory size", cd_size, all_ones32, cd_size64);
        cd_off = agree("the central directory offset", cd_off, all_ones32, cd_off64);
        records_begin = rec;
    }
    if (disk != 0 || cd_disk != 0 || n_disk != n)
        throw error("zip.multi_disk", src + ": the archive spans several disks (disk " + str(disk) +
                                          ", central directory on disk " + str(cd_disk) + ", " + str(n_disk) + " of " +
                                          str(n) + " entries here); expected a single-file archive");
    if (cd_off > records_begin || cd_size > records_begin - cd_off)
        throw error("zip.central_directory_out_of_bounds",
                    src + ": the central directory (" + str(cd_size) + " bytes at byte " + str(cd_off) +
                        ") does not end before the end of central directory records at byte " + str(records_begin));
    if (n > cd_size / central_size)
        throw error("zip.bad_entry_count", src + ": the end of central directory record claims " + str(n) +
                                               " entries, but a central directory of " + str(cd_size) +
                                               " bytes holds at most " + str(cd_size / central_size));

    std::vector<entry> entries;
    entries.reserve(static_cast<std::size_t>(n));
    std::unordered_set<std::string_view> names;  // views into entries[i].name (reserved: no reallocation)
    const std::uint64_t cd_end = cd_off + cd_size;
    std::uint64_t p = cd_off;
    for (std::uint64_t i = 0; i < n; ++i) {
        const std::string at = src + ": central directory entry " + str(i) + " at byte " + str(p);
        if (cd_end - p < central_size)
            throw error("zip.bad_central_entry", at + " runs past the end of the central directory (byte " + str(cd_end) + ")");
        if (le32(d + p) != sig_central) throw error("zip.bad_central_entry", at + " has a bad signature");
        const std::uint64_t name_len = le16(d + p + 28), extra_len = le16(d + p + 30), comment_len = le16(d + p + 32);
        if (cd_end - p - central_size < name_len + extra_len + comment_len)
            throw error("zip.bad_central_entry", at + " runs past the end of the central directory (byte " + str(cd_end) + ")");
        entry e;
        e.name.assign(reinterpret_cast<const char*>(d + p + central_size), static_cast<std::size_t>(name_len));
        const std::string ename = src + ": entry '" + detail::printable(e.name) + "'";
        e.flags = le16(d + p + 8);
        e.method = le16(d + p + 10);
        e.csize = le32(d + p + 20);
        e.usize = le32(d + p + 24);
        std::uint64_t disk_start = le16(d + p + 34);
        e.header = le32(d + p + 42);
        // ZIP64 extra field (id 1): 8-byte values for the fields that hold the marker, in order.
        const bool need64 = e.usize == all_ones32 || e.csize == all_ones32 || e.header == all_ones32 || disk_start == 0xffff;
        bool have64 = false;
        for (std::uint64_t x = p + central_size + name_len, x_end = x + extra_len; x < x_end;) {
            if (x_end - x < 4 || x_end - x - 4 < le16(d + x + 2))
                throw error("zip.bad_extra", ename + " has an extra field that runs past its end in the central directory");
            const std::uint16_t id = le16(d + x), len = le16(d + x + 2);
            if (id == 1 && !have64) {
                have64 = true;
                std::uint64_t q = x + 4, left = len;
                auto take = [&](std::uint64_t& field, std::uint64_t marker, const char* what) {
                    if (field != marker) return;
                    if (left < 8)
                        throw error("zip.bad_extra", ename + " has a ZIP64 extra field of " + str(len) +
                                                         " bytes, too short for its " + what);
                    field = le64(d + q);
                    q += 8;
                    left -= 8;
                };
                take(e.usize, all_ones32, "size");
                take(e.csize, all_ones32, "compressed size");
                take(e.header, all_ones32, "local header offset");
                if (disk_start == 0xffff) {
                    if (left < 4)
                        throw error("zip.bad_extra", ename + " has a ZIP64 extra field of " + str(len) +
                                                         " bytes, too short for its disk number");
                    disk_start = le32(d + q);
                }
            }
            x += 4 + len;
        }
        if (need64 && !have64)
            throw error("zip.bad_extra", ename + " has a size or offset marked 0xFFFFFFFF but no ZIP64 extra field");
        if (disk_start != 0)
            throw error("zip.multi_disk", ename + " starts on disk " + str(disk_start) + "; expected a single-file archive");
        if (e.method == 0 && e.csize != e.usize)
            throw error("zip.bad_central_entry", ename + " is stored, but its compressed size " + str(e.csize) +
                                                     " differs from its size " + str(e.usize));
        p += central_size + name_len + extra_len + comment_len;
        entries.push_back(std::move(e));
        if (!names.insert(entries.back().name).second)
            throw error("zip.duplicate_entry", src + ": entry '" + detail::printable(entries.back().name) +
                                                   "' appears more than once in the central directory");
    }
    if (p != cd_end)
        throw error("zip.bad_entry_count", src + ": the central directory has " + str(cd_end - p) +
                                               " bytes left after the " + str(n) + " entries the end record announces");

    // Local headers: inside the file, before the central directory, agreeing with it.
    for (entry& e : entries) {
        const std::string ename = src + ": entry '" + detail::printable(e.name) + "'";
        if (cd_off < local_size || e.header > cd_off - local_size)
            throw error("zip.local_header_out_of_bounds", ename + " has its local header at byte " + str(e.header) +
                                                              ", which does not fit before the central directory at byte " +
                                                              str(cd_off));
        const std::byte* h = d + e.header;
        if (le32(h) != sig_local)
            throw error("zip.bad_local_header", ename + " has no local file header at byte " + str(e.header) + " (bad signature)");
        const std::uint16_t flags = le16(h + 6), method = le16(h + 8);
        const std::uint64_t name_len = le16(h + 26), extra_len = le16(h + 28);
        e.data = e.header + local_size + name_len + extra_len;
        if (e.data > cd_off)
            throw error("zip.local_header_out_of_bounds", ename + ": the local header at byte " + str(e.header) +
                                                              " runs into the central directory at byte " + str(cd_off));
        const std::string_view local_name(reinterpret_cast<const char*>(h + local_size), static_cast<std::size_t>(name_len));
        if (local_name != e.name)
            throw error("zip.local_header_mismatch", ename + ": the local header at byte " + str(e.header) + " names '" +
                                                         detail::printable(local_name) + "'");
        if (method != e.method)
            throw error("zip.local_header_mismatch", ename + ": the local header gives compression method " +
                                                         str(method) + ", the central directory " + str(e.method));
        std::uint64_t local_usize = le32(h + 22), local_csize = le32(h + 18);
        if (local_usize == all_ones32 || local_csize == all_ones32) {
            bool have64 = false;
            const std::uint64_t x_begin = e.header + local_size + name_len;
            for (std::uint64_t x = x_begin, x_end = x_begin + extra_len; x < x_end;) {
                if (x_end - x < 4 || x_end - x - 4 < le16(d + x + 2))
                    throw error("zip.bad_extra", ename + " has an extra field that runs past its end in the local header");
                const std::uint16_t id = le16(d + x), len = le16(d + x + 2);
                if (id == 1 && !have64) {
                    have64 = true;
                    const std::uint64_t need = (local_usize == all_ones32 ? 8u : 0u) + (local_csize == all_ones32 ? 8u : 0u);
                    if (len < need)
                        throw error("zip.bad_extra", ename + " has a ZIP64 extra field of " + str(len) +
                                                         " bytes in its local header, too short for its sizes");
                    std::uint64_t q = x + 4;
                    if (local_usize == all_ones32) local_usize = le64(d + q), q += 8;
                    if (local_csize == all_ones32) local_csize = le64(d + q);
                }
                x += 4 + len;
            }
            if (!have64)
                throw error("zip.bad_extra", ename + " has a size marked 0xFFFFFFFF in its local header but no ZIP64 extra field");
        }
        const bool descriptor = (flags & 0x8u) != 0;  // sizes follow the data; the header may hold 0
        auto same = [&](const char* what, std::uint64_t local, std::uint64_t central) {
            if (local != central && !(descriptor && local == 0))
                throw error("zip.local_header_mismatch", ename + ": the local header gives " + what + " " + str(local) +
                                                             ", the central directory " + str(central));
        };
        same("size", local_usize, e.usize);
        same("compressed size", local_csize, e.csize);
        if (e.csize > cd_off - e.data)
            throw error("zip.entry_out_of_bounds", ename + ": its " + str(e.csize) + " bytes of data at byte " + str(e.data) +
                                                       " run into the central directory at byte " + str(cd_off));
    }
    std::vector<const entry*> order;
    order.reserve(entries.size());
    for (const entry& e : entries) order.push_back(&e);
    std::sort(order.begin(), order.end(), [](const entry* a, const entry* b) { return a->header < b->header; });
    for (std::size_t i = 1; i < order.size(); ++i) {
        const entry& a = *order[i - 1];
        const entry& b = *order[i];
        if (a.data + a.csize > b.header)
            throw error("zip.entries_overlap", src + ": entries '" + detail::printable(a.name) + "' (bytes " + str(a.header) +
                                                   " to " + str(a.data + a.csize) + ") and '" + detail::printable(b.name) +
                                                   "' (from byte " + str(b.header) + ") overlap");
    }
    return entries;
}

// The bytes of a stored entry. Errors: zip.encrypted_entry, zip.compressed_entry.
inline const std::byte* stored_data(const std::byte* d, const entry& e, const std::string& src) {
    if (e.flags & 0x1u)
        throw error("zip.encrypted_entry", src + ": entry '" + detail::printable(e.name) + "' is encrypted");
    if (e.method != 0)
        throw error("zip.compressed_entry",
                    src + ": entry '" + detail::printable(e.name) + "' is compressed (method " + str(e.method) +
                        (e.method == 8 ? ", deflate" : "") +
                        "); locost reads only stored entries, as torch.save writes them (re-save it with torch.save)");
    return d + e.data;
}

} // namespace detail::zip

namespace detail::pickle {

// Names of the pickle opcodes (protocols 0 to 5), for messages.
inline const char* opcode_name(unsigned char op) noexcept {
    switch (op) {
    case '(': return "MARK"; case '.': return "STOP"; case '0': return "POP"; case '1': return "POP_MARK";
    case '2': return "DUP"; case 'F': return "FLOAT"; case 'I': return "INT"; case 'J': return "BININT";
    case 'K': return "BININT1"; case 'L': return "LONG"; case 'M': return "BININT2"; case 'N': return "NONE";
    case 'P': return "PERSID"; case 'Q': return "BINPERSID"; case 'R': return "REDUCE"; case 'S': return "STRING";
    case 'T': return "BINSTRING"; case 'U': return "SHORT_BINSTRING"; case 'V': return "UNICODE";
    case 'X': return "BINUNICODE"; case 'a': return "APPEND"; case 'b': return "BUILD"; case 'c': return "GLOBAL";
    case 'd': return "DICT"; case '}': return "EMPTY_DICT"; case 'e': return "APPENDS"; case 'g': return "GET";
    case 'h': return "BINGET"; case 'i': return "INST"; case 'j': return "LONG_BINGET"; case 'l': return "LIST";
    case ']': return "EMPTY_LIST"; case 'o': return "OBJ"; case 'p': return "PUT"; case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT"; case 's': return "SETITEM"; case 't': return "TUPLE"; case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS"; case 'G': return "BINFLOAT"; case 'B': return "BINBYTES"; case 'C': return "SHORT_BINBYTES";
    case 0x80: return "PROTO"; case 0x81: return "NEWOBJ"; case 0x82: return "EXT1"; case 0x83: return "EXT2";
    case 0x84: return "EXT4"; case 0x85: return "TUPLE1"; case 0x86: return "TUPLE2"; case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE"; case 0x89: return "NEWFALSE"; case 0x8a: return "LONG1"; case 0x8b: return "LONG4";
    case 0x8c: return "SHORT_BINUNICODE"; case 0x8d: return "BINUNICODE8"; case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET"; case 0x90: return "ADDITEMS"; case 0x91: return "FROZENSET"; case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL"; case 0x94: return "MEMOIZE"; case 0x95: return "FRAME"; case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER"; case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
    }
}

// The globals a state dict needs. Storage types are inert tags; which ones locost reads is
// decided when a tensor uses one (pytorch.unsupported_dtype).
enum class global : std::uint8_t { ordered_dict, rebuild_tensor_v2, rebuild_tensor, rebuild_parameter, storage_type };

enum class kind : std::uint8_t { none, boolean, integer, floating, string, tuple, list, dict, global, storage, tensor };

struct object {
    kind k = kind::none;
    global g = global::ordered_dict;   // kind::global
    std::int64_t i = 0;                // boolean/integer value; storage/tensor: index into their tables
    double f = 0;
    std::string s;                     // string; global: its qualified name
    std::vector<std::uint32_t> items;  // tuple/list elements; dict: key, value, key, value, ...
};

// A persistent id. Its strings stay objects of the pickle: a key reused through the memo by
// many persistent ids is never copied.
struct storage {
    std::uint32_t type = 0;            // a global object, "torch.<X>Storage"
    std::uint32_t key = 0;             // a string object, at most max_key bytes
    std::int64_t numel = 0;
};

inline constexpr std::size_t max_rank = 64;
// Longest storage key accepted (torch writes decimal numbers).
inline constexpr std::size_t max_key = 256;
// Largest data.pkl accepted: ~100 bytes per tensor in practice; keeps object indices in 32 bits.
inline constexpr std::uint64_t max_pickle = std::uint64_t{1} << 30;

// A _rebuild_tensor(_v2) call. Its size and stride stay the tuples the pickle built (tuples
// never change once built), so a REDUCE repeated through the memo costs O(1) memory.
struct tensor {
    std::uint32_t storage = 0;         // index into unpickler::storages
    std::int64_t offset = 0;
    std::uint32_t size = 0, stride = 0;  // tuples of ints, rank <= max_rank, checked
};

inline std::string describe(const object& o) {
    switch (o.k) {
    case kind::none: return "None";
    case kind::boolean: return "a bool";
    case kind::integer: return "an int";
    case kind::floating: return "a float";
    case kind::string: return "a str";
    case kind::tuple: return "a tuple of " + std::to_string(o.items.size());
    case kind::list: return "a list";
    case kind::dict: return "a dict";
    case kind::global: return "the global " + detail::printable(o.s);
    case kind::storage: return "a storage";
    case kind::tensor: return "a tensor";
    }
    return "an object";
}

// Runs the restricted pickle machine over data.pkl. Never calls or imports anything: GLOBAL
// resolves to one of the tags above, REDUCE of a tag builds a plain value.
class unpickler {
public:
    unpickler(const std::byte* p, std::size_t n, std::string where) : p_(p), n_(n), where_(std::move(where)) {}

    // The root object.
    std::uint32_t run() {
        for (;;) {
            if (pos_ >= n_) fail("pytorch.pickle_truncated", "the pickle ends without a STOP opcode");
            at_ = pos_;
            op_ = static_cast<unsigned char>(p_[pos_++]);
            switch (op_) {
            case 0x80: {  // PROTO
                const unsigned v = u(1);
                if (v < 2 || v > 5)
                    fail("pytorch.bad_value", "pickle protocol " + std::to_string(v) + " is not supported (expected 2 to 5)");
                break;
            }
            case 0x95:  // FRAME: a length hint; the opcodes follow inline
                if (u(8) > n_ - pos_) fail("pytorch.pickle_truncated", "FRAME announces more bytes than the pickle holds");
                break;
            case '.': return pop();  // STOP
            case '(': marks_.push_back(stack_.size()); break;
            case '}': push(make(kind::dict)); break;
            case ']': push(make(kind::list)); break;
            case ')': push(make(kind::tuple)); break;
            case 't': {
                const std::size_t from = pop_mark();
                const std::uint32_t t = make(kind::tuple);
                objects_[t].items.assign(stack_.begin() + static_cast<std::ptrdiff_t>(from), stack_.end());
                stack_.resize(from);
                push(t);
                break;
            }
            case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
                const std::size_t k = op_ - 0x84u;
                need(k);
                const std::uint32_t t = make(kind::tuple);
                objects_[t].items.assign(stack_.end() - static_cast<std::ptrdiff_t>(k), stack_.end());
                stack_.resize(stack_.size() - k);
                push(t);
                break;
            }
            case 'X': push(string(u(4))); break;     // BINUNICODE
            case 0x8c: push(string(u(1))); break;    // SHORT_BINUNICODE
            case 0x8d: push(string(u(8))); break;    // BINUNICODE8
            case 'J': push(integer(static_cast<std::int32_t>(static_cast<std::uint32_t>(u(4))))); break;
            case 'K': push(integer(static_cast<std::int64_t>(u(1)))); break;
            case 'M': push(integer(static_cast<std::int64_t>(u(2)))); break;
            case 0x8a: {  // LONG1: little-endian two's complement
                const std::uint64_t len = u(1);
                if (len > 8) fail("pytorch.bad_value", "LONG1 integer of " + std::to_string(len) + " bytes does not fit in 64 bits");
                std::uint64_t v = len ? u(static_cast<std::size_t>(len)) : 0;
                if (len > 0 && len < 8 && (v >> (8 * len - 1)) != 0) v |= ~std::uint64_t{0} << (8 * len);
                push(integer(static_cast<std::int64_t>(v)));
                break;
            }
            case 'G': {  // BINFLOAT: big-endian double
                std::uint64_t bits = 0;
                const std::byte* b = take(8);
                for (int k = 0; k < 8; ++k) bits = bits << 8 | static_cast<std::uint64_t>(b[k]);
                const std::uint32_t o = make(kind::floating);
                std::memcpy(&objects_[o].f, &bits, 8);
                push(o);
                break;
            }
            case 0x88: case 0x89: {  // NEWTRUE, NEWFALSE
                const std::uint32_t o = make(kind::boolean);
                objects_[o].i = op_ == 0x88;
                push(o);
                break;
            }
            case 'N': push(make(kind::none)); break;
            case 'c': {  // GLOBAL "module\nname\n"
                const std::string module = line();
                const std::string name = line();
                push(resolve(module, name));
                break;
            }
            case 0x93: {  // STACK_GLOBAL
                need(2);
                const object& name = objects_[stack_.back()];
                const object& module = objects_[stack_[stack_.size() - 2]];
                if (module.k != kind::string || name.k != kind::string)
                    fail("pytorch.pickle_type", "STACK_GLOBAL needs two str, found " + describe(module) + " and " + describe(name));
                const std::string m = module.s, nm = name.s;
                stack_.resize(stack_.size() - 2);
                push(resolve(m, nm));
                break;
            }
            case 'q': put(u(1)); break;
            case 'r': put(u(4)); break;
            case 0x94: put(memo_.size()); break;  // MEMOIZE
            case 'h': get(u(1)); break;
            case 'j': get(u(4)); break;
            case 'R': reduce(); break;
            case 'Q': persistent_id(); break;
            case 's': {  // SETITEM
                need(3);
                const std::uint32_t value = pop(), key = pop();
                dict_top().items.insert(dict_top().items.end(), {key, value});
                break;
            }
            case 'u': {  // SETITEMS
                const std::size_t from = pop_mark();
                if ((stack_.size() - from) % 2 != 0)
                    fail("pytorch.pickle_type", "SETITEMS has an odd number (" + std::to_string(stack_.size() - from) +
                                                    ") of keys and values");
                std::vector<std::uint32_t> kv(stack_.begin() + static_cast<std::ptrdiff_t>(from), stack_.end());
                stack_.resize(from);
                auto& items = dict_top().items;
                items.insert(items.end(), kv.begin(), kv.end());
                break;
            }
            case 'a': {  // APPEND
                need(2);
                const std::uint32_t value = pop();
                list_top().items.push_back(value);
                break;
            }
            case 'e': {  // APPENDS
                const std::size_t from = pop_mark();
                std::vector<std::uint32_t> vs(stack_.begin() + static_cast<std::ptrdiff_t>(from), stack_.end());
                stack_.resize(from);
                auto& items = list_top().items;
                items.insert(items.end(), vs.begin(), vs.end());
                break;
            }
            case 'b': {  // BUILD: sets attributes (OrderedDict's _metadata); ignored for a dict
                need(2);
                pop();
                const object& target = objects_[stack_.back()];
                if (target.k != kind::dict)
                    fail("pytorch.pickle_type", "BUILD on " + describe(target) + " (only a dict's attributes are accepted)");
                break;
            }
            default: {
                const char* name = opcode_name(op_);
                char hex[8];
                std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned>(op_));
                fail("pytorch.unsupported_opcode", name ? "pickle opcode " + std::string(name) + " (" + hex +
                                                              ") is not supported (a state dict does not need it)"
                                                        : "unknown pickle opcode " + std::string(hex));
            }
            }
        }
    }

    const object& obj(std::uint32_t i) const { return objects_[i]; }
    const std::vector<storage>& storages() const noexcept { return storages_; }
    const std::vector<tensor>& tensors() const noexcept { return tensors_; }

private:
    [[noreturn]] void fail(const char* id, const std::string& what) const {
        throw error(id, where_ + " byte " + std::to_string(at_) + ": " + what);
    }
    std::string op_name() const { return opcode_name(op_); }

    const std::byte* take(std::size_t k) {
        if (n_ - pos_ < k) fail("pytorch.pickle_truncated", "the pickle ends inside the argument of " + op_name());
        const std::byte* b = p_ + pos_;
        pos_ += k;
        return b;
    }
    // A little-endian unsigned argument of k <= 8 bytes.
    std::uint64_t u(std::size_t k) {
        const std::byte* b = take(k);
        std::uint64_t v = 0;
        for (std::size_t i = k; i-- > 0;) v = v << 8 | static_cast<std::uint64_t>(b[i]);
        return v;
    }
    std::string line() {
        const auto* b = reinterpret_cast<const char*>(p_ + pos_);
        const void* nl = std::memchr(b, '\n', n_ - pos_);
        if (!nl) fail("pytorch.pickle_truncated", "the pickle ends inside the argument of " + op_name());
        const auto len = static_cast<std::size_t>(static_cast<const char*>(nl) - b);
        pos_ += len + 1;
        return std::string(b, len);
    }

    std::uint32_t make(kind k) {
        objects_.emplace_back();
        objects_.back().k = k;
        return static_cast<std::uint32_t>(objects_.size() - 1);
    }
    std::uint32_t integer(std::int64_t v) {
        const std::uint32_t o = make(kind::integer);
        objects_[o].i = v;
        return o;
    }
    std::uint32_t string(std::uint64_t len) {
        if (len > n_ - pos_) fail("pytorch.pickle_truncated", "the pickle ends inside the argument of " + op_name());
        std::string s(reinterpret_cast<const char*>(take(static_cast<std::size_t>(len))), static_cast<std::size_t>(len));
        if (!is_valid_utf8(s)) fail("pytorch.bad_value", "string '" + detail::printable(s) + "' is not valid UTF-8");
        const std::uint32_t o = make(kind::string);
        objects_[o].s = std::move(s);
        return o;
    }

    std::uint32_t resolve(const std::string& module, const std::string& name) {
        const std::uint32_t o = make(kind::global);
        object& g = objects_[o];
        g.s = module + "." + name;
        if (module == "collections" && name == "OrderedDict") g.g = global::ordered_dict;
        else if (module == "torch._utils" && name == "_rebuild_tensor_v2") g.g = global::rebuild_tensor_v2;
        else if (module == "torch._utils" && name == "_rebuild_tensor") g.g = global::rebuild_tensor;
        else if (module == "torch._utils" && name == "_rebuild_parameter") g.g = global::rebuild_parameter;
        else if (module == "torch" && name.size() > 7 && name.size() <= 64 && name.ends_with("Storage") &&
                 std::all_of(name.begin(), name.end(), [](char c) {
                     return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
                 }))
            g.g = global::storage_type;
        else
            fail("pytorch.unsupported_global",
                 "global '" + detail::printable(g.s) +
                     "' is not allowed (a state dict needs only collections.OrderedDict, "
                     "torch._utils._rebuild_tensor_v2, _rebuild_tensor, _rebuild_parameter and torch storage types)");
        return o;
    }

    void push(std::uint32_t o) { stack_.push_back(o); }
    // Objects above the innermost MARK (the pickle machine cannot see below it).
    std::size_t available() const noexcept { return stack_.size() - (marks_.empty() ? 0 : marks_.back()); }
    void need(std::size_t k) {
        if (available() < k)
            fail("pytorch.stack_underflow", op_name() + " needs " + std::to_string(k) + " object" + (k > 1 ? "s" : "") +
                                                " on the stack, found " + std::to_string(available()));
    }
    std::uint32_t pop() {
        need(1);
        const std::uint32_t o = stack_.back();
        stack_.pop_back();
        return o;
    }
    std::size_t pop_mark() {
        if (marks_.empty()) fail("pytorch.stack_underflow", op_name() + " needs a MARK, but there is none");
        const std::size_t m = marks_.back();
        marks_.pop_back();
        return m;
    }
    object& dict_top() {
        need(1);
        object& d = objects_[stack_.back()];
        if (d.k != kind::dict) fail("pytorch.pickle_type", op_name() + " on " + describe(d) + ", expected a dict");
        return d;
    }
    object& list_top() {
        need(1);
        object& l = objects_[stack_.back()];
        if (l.k != kind::list) fail("pytorch.pickle_type", op_name() + " on " + describe(l) + ", expected a list");
        return l;
    }
    void put(std::uint64_t index) {
        need(1);
        memo_[index] = stack_.back();
    }
    void get(std::uint64_t index) {
        const auto it = memo_.find(index);
        if (it == memo_.end()) fail("pytorch.memo_missing", op_name() + " of memo entry " + std::to_string(index) + ", which was never set");
        push(it->second);
    }

    void persistent_id() {
        const object& pid = objects_[pop()];
        auto bad = [&](const std::string& what) {
            fail("pytorch.bad_persistent_id", what + " (expected ('storage', storage type, key, location, numel))");
        };
        if (pid.k != kind::tuple || pid.items.size() != 5) bad("persistent id is " + describe(pid));
        const object& tag = objects_[pid.items[0]];
        const object& type = objects_[pid.items[1]];
        const object& key = objects_[pid.items[2]];
        const object& location = objects_[pid.items[3]];
        const object& numel = objects_[pid.items[4]];
        if (tag.k != kind::string || tag.s != "storage") bad("persistent id starts with " + describe(tag) + ", not 'storage'");
        if (type.k != kind::global || type.g != global::storage_type)
            bad("persistent id gives " + describe(type) + " as the storage type");
        if (key.k != kind::string) bad("persistent id gives " + describe(key) + " as the key");
        if (key.s.size() > max_key)
            bad("persistent id gives a key of " + std::to_string(key.s.size()) + " bytes, longer than " + std::to_string(max_key));
        if (location.k != kind::string) bad("persistent id gives " + describe(location) + " as the location");
        if (numel.k != kind::integer || numel.i < 0) bad("persistent id gives " + (numel.k == kind::integer ? std::to_string(numel.i) : describe(numel)) + " as the element count");
        storages_.push_back({pid.items[1], pid.items[2], numel.i});
        const std::uint32_t o = make(kind::storage);
        objects_[o].i = static_cast<std::int64_t>(storages_.size() - 1);
        push(o);
    }

    void reduce() {
        need(2);
        const std::uint32_t args_i = pop(), fn_i = pop();
        const object& fn = objects_[fn_i];
        const object& args = objects_[args_i];
        if (fn.k != kind::global) fail("pytorch.pickle_type", "REDUCE calls " + describe(fn) + ", expected an allowed global");
        if (args.k != kind::tuple) fail("pytorch.pickle_type", "REDUCE passes " + describe(args) + " to " + fn.s + ", expected a tuple");
        if (fn.g == global::ordered_dict) {
            if (!args.items.empty())
                fail("pytorch.pickle_type", "collections.OrderedDict gets " + std::to_string(args.items.size()) + " arguments, expected none");
            push(make(kind::dict));
            return;
        }
        if (fn.g == global::storage_type)
            fail("pytorch.pickle_type", "REDUCE calls " + fn.s + ", which may appear only in a persistent id");
        // Arity first: a huge tuple REDUCEd again and again through the memo is never copied.
        if (args.items.size() > 7) arity(fn.s, args.items.size(), fn.g == global::rebuild_tensor_v2 ? "6 or 7" : fn.g == global::rebuild_tensor ? "4" : "3");
        const std::vector<std::uint32_t> a = args.items;  // objects_ may grow below
        const std::string fname = fn.s;
        switch (fn.g) {
        case global::ordered_dict:
        case global::storage_type:
            return;  // handled above
        case global::rebuild_parameter: {
            if (a.size() != 3) arity(fname, a.size(), "3");
            if (objects_[a[0]].k != kind::tensor) argument(fname, 1, "data", objects_[a[0]], "a tensor");
            if (objects_[a[1]].k != kind::boolean) argument(fname, 2, "requires_grad", objects_[a[1]], "a bool");
            push(a[0]);  // the parameter is its data
            return;
        }
        case global::rebuild_tensor_v2:
        case global::rebuild_tensor: {
            const bool v2 = fn.g == global::rebuild_tensor_v2;
            if (v2 ? a.size() != 6 && a.size() != 7 : a.size() != 4) arity(fname, a.size(), v2 ? "6 or 7" : "4");
            const object& st = objects_[a[0]];
            if (st.k != kind::storage) argument(fname, 1, "storage", st, "a storage (persistent id)");
            const object& off = objects_[a[1]];
            if (off.k != kind::integer) argument(fname, 2, "storage_offset", off, "an int");
            tensor t;
            t.storage = static_cast<std::uint32_t>(st.i);
            t.offset = off.i;
            t.size = ints(fname, 3, "size", a[2]);
            t.stride = ints(fname, 4, "stride", a[3]);
            const std::size_t rank = objects_[t.size].items.size(), strides = objects_[t.stride].items.size();
            if (strides != rank)
                fail("pytorch.bad_tensor_args", fname + " gets " + std::to_string(rank) + " sizes but " +
                                                    std::to_string(strides) + " strides");
            if (v2) {
                if (objects_[a[4]].k != kind::boolean) argument(fname, 5, "requires_grad", objects_[a[4]], "a bool");
                if (objects_[a[5]].k != kind::dict) argument(fname, 6, "backward_hooks", objects_[a[5]], "a dict");
            }
            tensors_.push_back(std::move(t));
            const std::uint32_t o = make(kind::tensor);
            objects_[o].i = static_cast<std::int64_t>(tensors_.size() - 1);
            push(o);
            return;
        }
        }
    }
    [[noreturn]] void arity(const std::string& fn, std::size_t got, const char* want) const {
        fail("pytorch.bad_tensor_args", fn + " gets " + std::to_string(got) + " arguments, expected " + want);
    }
    [[noreturn]] void argument(const std::string& fn, int index, const char* what, const object& o, const char* want) const {
        fail("pytorch.bad_tensor_args",
             fn + " argument " + std::to_string(index) + " (" + what + ") is " + describe(o) + ", expected " + want);
    }
    // Checks that object i is a tuple of at most max_rank ints; returns i.
    std::uint32_t ints(const std::string& fn, int index, const char* what, std::uint32_t i) const {
        const object& o = objects_[i];
        if (o.k != kind::tuple) argument(fn, index, what, o, "a tuple of ints");
        if (o.items.size() > max_rank)
            fail("pytorch.bad_tensor_args", fn + " argument " + std::to_string(index) + " (" + what + ") has " +
                                                std::to_string(o.items.size()) + " elements, more than the " +
                                                std::to_string(max_rank) + " dimensions locost accepts");
        for (const std::uint32_t e : o.items)
            if (objects_[e].k != kind::integer) argument(fn, index, what, o, "a tuple of ints");
        return i;
    }

    const std::byte* p_;
    std::size_t n_;
    std::string where_;
    std::size_t pos_ = 0, at_ = 0;
    unsigned char op_ = 0;
    std::vector<object> objects_;
    std::vector<std::uint32_t> stack_;
    std::vector<std::size_t> marks_;
    std::unordered_map<std::uint64_t, std::uint32_t> memo_;
    std::vector<storage> storages_;
    std::vector<tensor> tensors_;
};

// The dtype of a torch storage type ("FloatStorage"), if locost reads it.
inline std::optional<dtype> storage_dtype(std::string_view type) noexcept {
    static constexpr std::pair<std::string_view, dtype> table[] = {
        {"FloatStorage", dtype::f32}, {"HalfStorage", dtype::f16},  {"BFloat16Storage", dtype::bf16},
        {"DoubleStorage", dtype::f64}, {"LongStorage", dtype::i64}, {"IntStorage", dtype::i32},
        {"ShortStorage", dtype::i16}, {"CharStorage", dtype::i8},   {"ByteStorage", dtype::u8},
        {"BoolStorage", dtype::boolean}};
    for (const auto& [name, t] : table)
        if (name == type) return t;
    return std::nullopt;
}

} // namespace detail::pickle

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
                    src + ": legacy torch.save format (a bare pickle, torch < 1.6), which locost does not read; re-save it "
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
            throw error("pytorch.ambiguous_archive", src + ": the archive holds both '" + detail::printable(pkl->name) +
                                                         "' and '" + detail::printable(e.name) +
                                                         "' (expected one top-level folder with one data.pkl)");
        pkl = &e;
    }
    if (!pkl)
        throw error("pytorch.missing_data_pkl", src + ": the zip archive has no <folder>/data.pkl entry (" +
                                                    std::to_string(entries.size()) +
                                                    " entries); expected a torch.save file");
    const std::string folder = pkl->name.substr(0, pkl->name.size() - 8);  // "<folder>/"
    if (const auto it = by_name.find(folder + "byteorder"); it != by_name.end()) {
        const zip::entry& e = *it->second;
        const auto* b = reinterpret_cast<const char*>(zip::stored_data(data, e, src));
        const std::string_view order(b, static_cast<std::size_t>(e.usize));
        if (order != "little")
            throw error("pytorch.unsupported_byteorder", src + ": '" + detail::printable(e.name) + "' says '" +
                                                             detail::printable(order) +
                                                             "'; locost reads only little-endian checkpoints");
    }

    if (pkl->usize > pk::max_pickle)
        throw error("pytorch.pickle_too_large", src + ": '" + detail::printable(pkl->name) + "' is " +
                                                    std::to_string(pkl->usize) + " bytes, beyond the limit of " +
                                                    std::to_string(pk::max_pickle) + " for a state dict's pickle");
    pk::unpickler u(zip::stored_data(data, *pkl, src), static_cast<std::size_t>(pkl->usize),
                    src + ": " + detail::printable(pkl->name));
    const pk::object* root = &u.obj(u.run());
    if (root->k != pk::kind::dict)
        throw error("pytorch.root_not_dict", src + ": the pickled object is " + pk::describe(*root) +
                                                 ", expected a dict of tensor names to tensors (a state_dict)");
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
    std::unordered_map<std::string_view, resolved_storage> storages;  // by key
    std::unordered_map<std::uint32_t, std::shared_ptr<const std::vector<std::byte>>> copies;  // per tensor object
    std::uint64_t copied = 0;
    std::unordered_set<std::string_view> names;
    std::vector<tensor_record> out;
    out.reserve(root->items.size() / 2);
    for (std::size_t i = 0; i + 1 < root->items.size(); i += 2) {
        const pk::object& k = u.obj(root->items[i]);
        const pk::object& v = u.obj(root->items[i + 1]);
        if (k.k != pk::kind::string)
            throw error("pytorch.key_not_string", src + ": state dict entry " + std::to_string(i / 2) + " has " +
                                                      pk::describe(k) + " as its key, expected a str");
        const std::string tname = src + ": tensor '" + detail::printable(k.s) + "'";
        if (!names.insert(k.s).second)
            throw error("pytorch.duplicate_key", tname + " appears more than once in the state dict");
        if (v.k != pk::kind::tensor)
            throw error("pytorch.not_a_tensor", tname + " is " + pk::describe(v) + ", expected a tensor");
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
        const auto st_type = pk::storage_dtype(stype);
        if (!st_type)
            throw error("pytorch.unsupported_dtype",
                        tname + " is stored as torch." + detail::printable(stype) +
                            ", which locost does not read (expected Float, Half, BFloat16, Double, Long, Int, Short, "
                            "Char, Byte or Bool storage)");
        auto sit = storages.find(skey);
        if (sit == storages.end()) {
            const auto rit = by_name.find(folder + "data/" + skey);
            if (rit == by_name.end())
                throw error("pytorch.missing_storage", tname + " uses storage '" + detail::printable(skey) +
                                                           "', but the archive has no entry '" +
                                                           detail::printable(folder + "data/" + skey) + "'");
            const zip::entry& rec = *rit->second;
            const std::byte* bytes = zip::stored_data(data, rec, src);
            std::uint64_t need = 0;
            const bool too_big =
                __builtin_mul_overflow(static_cast<std::uint64_t>(s.numel), static_cast<std::uint64_t>(size_of(*st_type)), &need);
            if (too_big || need != rec.usize)
                throw error("pytorch.storage_size_mismatch",
                            tname + ": storage '" + detail::printable(skey) + "' of " + std::to_string(s.numel) +
                                " elements of torch." + stype + " needs " + (too_big ? "over 2^64" : std::to_string(need)) +
                                " bytes, but '" + detail::printable(rec.name) + "' holds " + std::to_string(rec.usize));
            sit = storages.emplace(skey, resolved_storage{u.obj(s.type).s, s.numel, bytes, *st_type}).first;
            sit->second.type_name.remove_prefix(6);
        } else if (sit->second.type_name != stype || sit->second.numel != s.numel) {
            throw error("pytorch.storage_conflict",
                        tname + " uses storage '" + detail::printable(skey) + "' as " + std::to_string(s.numel) +
                            " elements of torch." + stype + ", but another tensor uses it as " +
                            std::to_string(sit->second.numel) + " elements of torch." + std::string(sit->second.type_name));
        }
        const resolved_storage& rs = sit->second;
        const std::uint64_t esize = size_of(rs.type);

        // The view: non-negative geometry, a size that fits, every element inside the storage.
        tensor_record r;
        r.name = k.s;
        r.type = rs.type;
        r.source = src;
        r.shape.assign(sizes.begin(), sizes.end());
        if (t.offset < 0)
            throw error("pytorch.bad_tensor", tname + " has storage offset " + std::to_string(t.offset) + ", expected >= 0");
        for (std::size_t d = 0; d < rank; ++d) {
            if (sizes[d] < 0)
                throw error("pytorch.bad_tensor", tname + " has size " + std::to_string(sizes[d]) + " in dimension " +
                                                      std::to_string(d) + " (shape " + r.shape.str() + "), expected >= 0");
            if (strides[d] < 0)
                throw error("pytorch.bad_tensor", tname + " has stride " + std::to_string(strides[d]) + " in dimension " +
                                                      std::to_string(d) + ", expected >= 0");
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

} // namespace locost::io
