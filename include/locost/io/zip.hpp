// Zip archives as torch.save writes them: the central directory of a zip image in memory,
// validated, and the bytes of its stored entries. Nothing is decompressed or copied.
//
// Design
//  * The end of central directory record is searched backwards over at most its maximal extent
//    (22 + 65535 bytes of comment); ZIP64 (locator, record, extra fields) is read, and the 32-bit
//    fields must agree with it unless they hold the all-ones marker.
//  * Every offset and size is checked against the image with overflow-safe arithmetic; the entry
//    count is bounded by what the central directory's size can hold before anything is
//    allocated; each local header must agree with the central directory (signature, name,
//    method, sizes; a size of 0 is accepted when bit 3 says a data descriptor follows, as
//    torch's writer does); entries lie before the central directory and do not overlap; names
//    are unique.
//  * Compressed or encrypted entries are refused when read (stored_data): torch.save never
//    compresses; re-zipping a checkpoint does.
//  * CRCs are not verified: that would read every byte of gigabytes of weights at open time,
//    while everything that decides which bytes are read is validated.
//  * Errors are locost::error "zip.*" (docs/errors.md), each message starting with the
//    source's name. Its only reader is the PyTorch one (pytorch.hpp), so the messages give the
//    advice that fits a torch.save file.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "../config/error.hpp"
#include "json.hpp"  // detail::printable

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

inline constexpr std::uint32_t sig_local = 0x04034b50, sig_central = 0x02014b50, sig_end = 0x06054b50, sig_end64 = 0x06064b50,
                               sig_locator64 = 0x07064b50;
inline constexpr std::uint64_t end_size = 22, central_size = 46, local_size = 30, end64_size = 56, locator64_size = 20;
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
        throw error("zip.no_end_record",
                    src +
                        ": no zip end of central directory record (expected a torch.save "
                        "file, a zip archive since torch 1.6; the file may be truncated)");
    std::uint64_t disk = le16(d + eocd + 4), cd_disk = le16(d + eocd + 6), n_disk = le16(d + eocd + 8), n = le16(d + eocd + 10),
                  cd_size = le32(d + eocd + 12), cd_off = le32(d + eocd + 16);
    std::uint64_t records_begin = eocd;  // the central directory must end before this

    if (eocd >= locator64_size && le32(d + eocd - locator64_size) == sig_locator64) {
        const std::uint64_t loc = eocd - locator64_size;
        const std::uint32_t loc_disk = le32(d + loc + 4), disks = le32(d + loc + 16);
        const std::uint64_t rec = le64(d + loc + 8);
        if (loc_disk != 0 || disks > 1)
            throw error("zip.multi_disk", src + ": the ZIP64 locator describes " + str(disks) + " disks; expected a single-file archive");
        if (rec > loc || loc - rec < end64_size)
            throw error("zip.zip64_invalid",
                        src + ": the ZIP64 locator points to byte " + str(rec) +
                            ", which leaves no room for the 56-byte ZIP64 end of central "
                            "directory record before the locator at byte " +
                            str(loc));
        if (le32(d + rec) != sig_end64)
            throw error("zip.zip64_invalid", src + ": no ZIP64 end of central directory record at byte " + str(rec) + " (bad signature)");
        const std::uint64_t rec_size = le64(d + rec + 4);
        if (rec_size < end64_size - 12 || rec_size > loc - rec - 12)
            throw error("zip.zip64_invalid",
                        src + ": the ZIP64 end of central directory record at byte " + str(rec) + " gives its size as " + str(rec_size) +
                            " (expected 44 to " + str(loc - rec - 12) + ")");
        const std::uint64_t disk64 = le32(d + rec + 16), cd_disk64 = le32(d + rec + 20), n_disk64 = le64(d + rec + 24),
                            n64 = le64(d + rec + 32), cd_size64 = le64(d + rec + 40), cd_off64 = le64(d + rec + 48);
        // A 32-bit field holds either the value itself or the all-ones ZIP64 marker.
        auto agree = [&](const char* what, std::uint64_t v, std::uint64_t marker, std::uint64_t v64) {
            if (v != marker && v != v64)
                throw error("zip.zip64_mismatch",
                            src + ": " + what + " is " + str(v) + " in the end of central directory record but " + str(v64) +
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
        throw error("zip.multi_disk",
                    src + ": the archive spans several disks (disk " + str(disk) + ", central directory on disk " + str(cd_disk) + ", " +
                        str(n_disk) + " of " + str(n) + " entries here); expected a single-file archive");
    if (cd_off > records_begin || cd_size > records_begin - cd_off)
        throw error("zip.central_directory_out_of_bounds",
                    src + ": the central directory (" + str(cd_size) + " bytes at byte " + str(cd_off) +
                        ") does not end before the end of central directory records at byte " + str(records_begin));
    if (n > cd_size / central_size)
        throw error("zip.bad_entry_count",
                    src + ": the end of central directory record claims " + str(n) + " entries, but a central directory of " +
                        str(cd_size) + " bytes holds at most " + str(cd_size / central_size));

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
                        throw error("zip.bad_extra",
                                    ename + " has a ZIP64 extra field of " + str(len) + " bytes, too short for its " + what);
                    field = le64(d + q);
                    q += 8;
                    left -= 8;
                };
                take(e.usize, all_ones32, "size");
                take(e.csize, all_ones32, "compressed size");
                take(e.header, all_ones32, "local header offset");
                if (disk_start == 0xffff) {
                    if (left < 4)
                        throw error("zip.bad_extra",
                                    ename + " has a ZIP64 extra field of " + str(len) + " bytes, too short for its disk number");
                    disk_start = le32(d + q);
                }
            }
            x += 4 + len;
        }
        if (need64 && !have64) throw error("zip.bad_extra", ename + " has a size or offset marked 0xFFFFFFFF but no ZIP64 extra field");
        if (disk_start != 0)
            throw error("zip.multi_disk", ename + " starts on disk " + str(disk_start) + "; expected a single-file archive");
        if (e.method == 0 && e.csize != e.usize)
            throw error("zip.bad_central_entry",
                        ename + " is stored, but its compressed size " + str(e.csize) + " differs from its size " + str(e.usize));
        p += central_size + name_len + extra_len + comment_len;
        entries.push_back(std::move(e));
        if (!names.insert(entries.back().name).second)
            throw error("zip.duplicate_entry",
                        src + ": entry '" + detail::printable(entries.back().name) + "' appears more than once in the central directory");
    }
    if (p != cd_end)
        throw error("zip.bad_entry_count",
                    src + ": the central directory has " + str(cd_end - p) + " bytes left after the " + str(n) +
                        " entries the end record announces");

    // Local headers: inside the file, before the central directory, agreeing with it.
    for (entry& e : entries) {
        const std::string ename = src + ": entry '" + detail::printable(e.name) + "'";
        if (cd_off < local_size || e.header > cd_off - local_size)
            throw error("zip.local_header_out_of_bounds",
                        ename + " has its local header at byte " + str(e.header) +
                            ", which does not fit before the central directory at byte " + str(cd_off));
        const std::byte* h = d + e.header;
        if (le32(h) != sig_local)
            throw error("zip.bad_local_header", ename + " has no local file header at byte " + str(e.header) + " (bad signature)");
        const std::uint16_t flags = le16(h + 6), method = le16(h + 8);
        const std::uint64_t name_len = le16(h + 26), extra_len = le16(h + 28);
        e.data = e.header + local_size + name_len + extra_len;
        if (e.data > cd_off)
            throw error("zip.local_header_out_of_bounds",
                        ename + ": the local header at byte " + str(e.header) + " runs into the central directory at byte " + str(cd_off));
        const std::string_view local_name(reinterpret_cast<const char*>(h + local_size), static_cast<std::size_t>(name_len));
        if (local_name != e.name)
            throw error("zip.local_header_mismatch",
                        ename + ": the local header at byte " + str(e.header) + " names '" + detail::printable(local_name) + "'");
        if (method != e.method)
            throw error("zip.local_header_mismatch",
                        ename + ": the local header gives compression method " + str(method) + ", the central directory " + str(e.method));
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
                        throw error("zip.bad_extra",
                                    ename + " has a ZIP64 extra field of " + str(len) +
                                        " bytes in its local header, too short for its sizes");
                    std::uint64_t q = x + 4;
                    if (local_usize == all_ones32) local_usize = le64(d + q), q += 8;
                    if (local_csize == all_ones32) local_csize = le64(d + q);
                }
                x += 4 + len;
            }
            if (!have64) throw error("zip.bad_extra", ename + " has a size marked 0xFFFFFFFF in its local header but no ZIP64 extra field");
        }
        const bool descriptor = (flags & 0x8u) != 0;  // sizes follow the data; the header may hold 0
        auto same = [&](const char* what, std::uint64_t local, std::uint64_t central) {
            if (local != central && !(descriptor && local == 0))
                throw error("zip.local_header_mismatch",
                            ename + ": the local header gives " + what + " " + str(local) + ", the central directory " + str(central));
        };
        same("size", local_usize, e.usize);
        same("compressed size", local_csize, e.csize);
        if (e.csize > cd_off - e.data)
            throw error("zip.entry_out_of_bounds",
                        ename + ": its " + str(e.csize) + " bytes of data at byte " + str(e.data) +
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
            throw error("zip.entries_overlap",
                        src + ": entries '" + detail::printable(a.name) + "' (bytes " + str(a.header) + " to " + str(a.data + a.csize) +
                            ") and '" + detail::printable(b.name) + "' (from byte " + str(b.header) + ") overlap");
    }
    return entries;
}

// The bytes of a stored entry. Errors: zip.encrypted_entry, zip.compressed_entry.
inline const std::byte* stored_data(const std::byte* d, const entry& e, const std::string& src) {
    if (e.flags & 0x1u) throw error("zip.encrypted_entry", src + ": entry '" + detail::printable(e.name) + "' is encrypted");
    if (e.method != 0)
        throw error("zip.compressed_entry",
                    src + ": entry '" + detail::printable(e.name) + "' is compressed (method " + str(e.method) +
                        (e.method == 8 ? ", deflate" : "") +
                        "); locost reads only stored entries, as torch.save writes them (re-save it with torch.save)");
    return d + e.data;
}

}  // namespace detail::zip

}  // namespace locost::io
