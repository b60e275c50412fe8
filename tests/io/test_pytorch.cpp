// PyTorch pytorch_model.bin reader (io/pytorch.hpp) and the checkpoint formats side by side.
//
// The .bin files live in tests/data/pytorch, written by make_pytorch_files.py there with torch
// 1.13 (valid files) or assembled byte by byte (malformed/*.bin: each must fail with one exact
// error id and message). F16, BF16 and sharded safetensors copies of the tiny checkpoint are
// written by the tests into LOCOST_TEST_TMP.
#include "helpers.hpp"

#include <locost/io/checkpoint.hpp>
#include <locost/io/pytorch.hpp>
#include <locost/io/safetensors.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace locost;
using locost::io::safetensors_file;
using locost::io::safetensors_writer;
using locost::io::tensor_record;

namespace {

using test::data_dir;
const std::string pt_dir = data_dir + "/pytorch";
using test::tiny_dir;

std::string pt_scratch(const std::string& name) { return test::scratch_dir("pt_" + name); }

using test::check_error;

using test::as_floats;

std::map<std::string, const tensor_record*> by_name(const std::vector<tensor_record>& records) {
    std::map<std::string, const tensor_record*> m;
    for (const auto& r : records) m[r.name] = &r;
    return m;
}

bool same_record(const tensor_record& a, const tensor_record& b) {
    return a.name == b.name && a.type == b.type && a.shape == b.shape && a.nbytes == b.nbytes &&
        (a.nbytes == 0 || std::memcmp(a.bytes, b.bytes, a.nbytes) == 0);
}

std::vector<std::byte> file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> b(c.size());
    if (!c.empty()) std::memcpy(b.data(), c.data(), c.size());
    return b;
}

// Parses an exact-size copy (so ASan sees any read past its end) and touches every byte a
// record claims. Returns whether it loaded; anything but a locost::error propagates.
bool try_parse(const std::byte* data, std::size_t size) {
    std::vector<std::byte> copy(data, data + size);
    try {
        const auto recs = io::read_pytorch_bin_buffer(copy.data(), copy.size(), "mem.bin", nullptr);
        unsigned sum = 0;
        for (const auto& r : recs)
            for (std::size_t i = 0; i < r.nbytes; ++i) sum += static_cast<unsigned>(r.bytes[i]);
        (void)sum;
        return true;
    } catch (const locost::error&) { return false; }
}

}  // namespace

TEST_CASE("pytorch: every malformed file fails with its exact error") {
    struct case_t {
        const char* file;
        const char* id;
        std::string message;
    };
    const std::string eocd =
        "no zip end of central directory record (expected a torch.save file, a zip archive since torch 1.6; the file may be truncated)";
    const std::string globals =
        "is not allowed (a state dict needs only collections.OrderedDict, torch._utils._rebuild_tensor_v2, _rebuild_tensor, _rebuild_parameter and torch storage types)";
    const std::string pid = " (expected ('storage', storage type, key, location, numel))";
    // Messages after "<path>: ".
    const case_t cases[] = {
        // Not a (whole) zip archive.
        {"empty", "zip.no_end_record", eocd},
        {"not_zip", "zip.no_end_record", eocd},
        {"truncated_1", "zip.no_end_record", eocd},
        {"truncated_in_data", "zip.no_end_record", eocd},
        {"truncated_in_central", "zip.no_end_record", eocd},
        {"truncated_in_end", "zip.no_end_record", eocd},
        {"legacy", "pytorch.legacy_format",
         "legacy torch.save format (a bare pickle, torch < 1.6), which locost does not read; re-save it with torch >= 1.6 (torch.save(torch.load(f), f)) or convert it to safetensors"},
        // End of central directory records.
        {"cd_offset_out_of_bounds", "zip.central_directory_out_of_bounds",
         "the central directory (183 bytes at byte 671) does not end before the end of central directory records at byte 649"},
        {"cd_size_out_of_bounds", "zip.central_directory_out_of_bounds",
         "the central directory (1183 bytes at byte 466) does not end before the end of central directory records at byte 649"},
        {"entry_count_too_large", "zip.bad_entry_count",
         "the end of central directory record claims 60000 entries, but a central directory of 183 bytes holds at most 3"},
        {"entry_count_too_small", "zip.bad_entry_count",
         "the central directory has 61 bytes left after the 2 entries the end record announces"},
        {"multi_disk", "zip.multi_disk",
         "the archive spans several disks (disk 1, central directory on disk 0, 3 of 3 entries here); expected a single-file archive"},
        // Central directory entries and local headers.
        {"central_bad_signature", "zip.bad_central_entry", "central directory entry 1 at byte 528 has a bad signature"},
        {"duplicate_entry", "zip.duplicate_entry", "entry 'archive/data/0' appears more than once in the central directory"},
        {"local_bad_signature", "zip.bad_local_header", "entry 'archive/data/0' has no local file header at byte 247 (bad signature)"},
        {"local_name_mismatch", "zip.local_header_mismatch", "entry 'archive/data/0': the local header at byte 247 names 'archive/data/9'"},
        {"local_size_mismatch", "zip.local_header_mismatch",
         "entry 'archive/data/0': the local header gives size 20, the central directory 24"},
        {"local_method_mismatch", "zip.local_header_mismatch",
         "entry 'archive/data/0': the local header gives compression method 8, the central directory 0"},
        {"local_header_out_of_bounds", "zip.local_header_out_of_bounds",
         "entry 'archive/data/0' has its local header at byte 456, which does not fit before the central directory at byte 466"},
        {"entry_out_of_bounds", "zip.entry_out_of_bounds",
         "entry 'archive/data/0': its 147 bytes of data at byte 320 run into the central directory at byte 466"},
        {"entries_overlap", "zip.entries_overlap",
         "entries 'archive/data.pkl' (bytes 0 to 248) and 'archive/data/0' (from byte 247) overlap"},
        {"compressed_entry", "zip.compressed_entry",
         "entry 'archive/data.pkl' is compressed (method 8, deflate); locost reads only stored entries, as torch.save writes them (re-save it with torch.save)"},
        {"encrypted_entry", "zip.encrypted_entry", "entry 'archive/data/0' is encrypted"},
        // ZIP64 records and extra fields that lie.
        {"zip64_offset_mismatch", "zip.zip64_mismatch",
         "the central directory offset is 606 in the end of central directory record but 602 in the ZIP64 record"},
        {"zip64_locator_out_of_bounds", "zip.zip64_invalid",
         "the ZIP64 locator points to byte 885, which leaves no room for the 56-byte ZIP64 end of central directory record before the locator at byte 925"},
        {"zip64_bad_signature", "zip.zip64_invalid", "no ZIP64 end of central directory record at byte 869 (bad signature)"},
        {"zip64_count_lies", "zip.bad_entry_count",
         "the end of central directory record claims 1152921504606846976 entries, but a central directory of 267 bytes holds at most 5"},
        {"zip64_cd_size_lies", "zip.central_directory_out_of_bounds",
         "the central directory (9223372036854775813 bytes at byte 602) does not end before the end of central directory records at byte 869"},
        {"zip64_extra_size_lies", "zip.entry_out_of_bounds",
         "entry 'archive/data/0': its 18446744073709551614 bytes of data at byte 448 run into the central directory at byte 602"},
        {"zip64_extra_offset_lies", "zip.local_header_out_of_bounds",
         "entry 'archive/data/0' has its local header at byte 18446744073709551600, which does not fit before the central directory at byte 602"},
        {"zip64_extra_short", "zip.bad_extra",
         "entry 'archive/data/0' has a ZIP64 extra field of 8 bytes, too short for its compressed size"},
        {"zip64_missing_extra", "zip.bad_extra", "entry 'archive/data/0' has a size or offset marked 0xFFFFFFFF but no ZIP64 extra field"},
        // Archive layout.
        {"missing_data_pkl", "pytorch.missing_data_pkl",
         "the zip archive has no <folder>/data.pkl entry (2 entries); expected a torch.save file"},
        {"two_data_pkl", "pytorch.ambiguous_archive",
         "the archive holds both 'a/data.pkl' and 'b/data.pkl' (expected one top-level folder with one data.pkl)"},
        {"missing_storage", "pytorch.missing_storage", "tensor 'w' uses storage '0', but the archive has no entry 'archive/data/0'"},
        {"big_endian", "pytorch.unsupported_byteorder", "'archive/byteorder' says 'big'; locost reads only little-endian checkpoints"},
        // The pickle machine: nothing outside the whitelist runs, nothing underflows.
        {"os_system", "pytorch.unsupported_global", "archive/data.pkl byte 2: global 'os.system' " + globals},
        {"load_from_bytes", "pytorch.unsupported_global", "archive/data.pkl byte 36: global 'torch.storage._load_from_bytes' " + globals},
        {"opcode_inst", "pytorch.unsupported_opcode",
         "archive/data.pkl byte 2: pickle opcode INST (0x69) is not supported (a state dict does not need it)"},
        {"opcode_unknown", "pytorch.unsupported_opcode", "archive/data.pkl byte 2: unknown pickle opcode 0x01"},
        {"protocol_6", "pytorch.bad_value", "archive/data.pkl byte 0: pickle protocol 6 is not supported (expected 2 to 5)"},
        {"no_stop", "pytorch.pickle_truncated", "archive/data.pkl byte 165: the pickle ends without a STOP opcode"},
        {"truncated_string", "pytorch.pickle_truncated", "archive/data.pkl byte 3: the pickle ends inside the argument of BINUNICODE"},
        {"stack_underflow", "pytorch.stack_underflow", "archive/data.pkl byte 27: REDUCE needs 2 objects on the stack, found 1"},
        {"mark_underflow", "pytorch.stack_underflow", "archive/data.pkl byte 4: TUPLE needs a MARK, but there is none"},
        {"setitems_below_mark", "pytorch.stack_underflow", "archive/data.pkl byte 10: SETITEM needs 3 objects on the stack, found 1"},
        {"memo_missing", "pytorch.memo_missing", "archive/data.pkl byte 3: BINGET of memo entry 7, which was never set"},
        {"long_too_big", "pytorch.bad_value", "archive/data.pkl byte 3: LONG1 integer of 9 bytes does not fit in 64 bits"},
        {"bad_utf8_key", "pytorch.bad_value", "archive/data.pkl byte 4: string 'w\\xff' is not valid UTF-8"},
        {"setitems_odd", "pytorch.pickle_type", "archive/data.pkl byte 10: SETITEMS has an odd number (1) of keys and values"},
        {"reduce_not_callable", "pytorch.pickle_type", "archive/data.pkl byte 9: REDUCE calls a str, expected an allowed global"},
        {"build_on_list", "pytorch.pickle_type", "archive/data.pkl byte 4: BUILD on a list (only a dict's attributes are accepted)"},
        {"storage_called", "pytorch.pickle_type",
         "archive/data.pkl byte 23: REDUCE calls torch.FloatStorage, which may appear only in a persistent id"},
        {"persistent_id_short", "pytorch.bad_persistent_id", "archive/data.pkl byte 56: persistent id is a tuple of 2" + pid},
        {"persistent_id_type", "pytorch.bad_persistent_id",
         "archive/data.pkl byte 117: persistent id gives a str as the storage type" + pid},
        {"persistent_id_key_long", "pytorch.bad_persistent_id",
         "archive/data.pkl byte 419: persistent id gives a key of 300 bytes, longer than 256" + pid},
        {"tensor_args_count", "pytorch.bad_tensor_args",
         "archive/data.pkl byte 133: torch._utils._rebuild_tensor_v2 gets 5 arguments, expected 6 or 7"},
        {"tensor_args_many", "pytorch.bad_tensor_args",
         "archive/data.pkl byte 171: torch._utils._rebuild_tensor_v2 gets 100 arguments, expected 6 or 7"},
        {"tensor_size_not_tuple", "pytorch.bad_tensor_args",
         "archive/data.pkl byte 131: torch._utils._rebuild_tensor_v2 argument 3 (size) is a list, expected a tuple of ints"},
        {"tensor_rank_65", "pytorch.bad_tensor_args",
         "archive/data.pkl byte 416: torch._utils._rebuild_tensor_v2 argument 3 (size) has 65 elements, more than the 64 dimensions locost accepts"},
        {"stride_count", "pytorch.bad_tensor_args",
         "archive/data.pkl byte 162: torch._utils._rebuild_tensor_v2 gets 2 sizes but 1 strides"},
        // The state dict and its tensors.
        {"root_not_dict", "pytorch.root_not_dict",
         "the pickled object is a list, expected a dict of tensor names to tensors (a state_dict)"},
        {"key_not_string", "pytorch.key_not_string", "state dict entry 0 has an int as its key, expected a str"},
        {"not_a_tensor", "pytorch.not_a_tensor", "tensor 'w' is an int, expected a tensor"},
        {"duplicate_key", "pytorch.duplicate_key", "tensor 'w' appears more than once in the state dict"},
        {"unsupported_dtype", "pytorch.unsupported_dtype",
         "tensor 'w' is stored as torch.ComplexFloatStorage, which locost does not read (expected Float, Half, BFloat16, Double, Long, Int, Short, Char, Byte or Bool storage)"},
        {"storage_size_mismatch", "pytorch.storage_size_mismatch",
         "tensor 'w': storage '0' of 5 elements of torch.FloatStorage needs 20 bytes, but 'archive/data/0' holds 24"},
        {"storage_numel_overflow", "pytorch.storage_size_mismatch",
         "tensor 'w': storage '0' of 4611686018427387904 elements of torch.FloatStorage needs over 2^64 bytes, but 'archive/data/0' holds 24"},
        {"storage_conflict", "pytorch.storage_conflict",
         "tensor 'h' uses storage '0' as 12 elements of torch.HalfStorage, but another tensor uses it as 6 elements of torch.FloatStorage"},
        {"out_of_bounds", "pytorch.tensor_out_of_bounds",
         "tensor 'w' (shape (3, 3), stride (3, 1), storage offset 0) reaches element 8 of storage '0', which holds 6"},
        {"out_of_bounds_offset", "pytorch.tensor_out_of_bounds",
         "tensor 'w' (shape (2, 3), stride (1, 2), storage offset 4) reaches element 9 of storage '0', which holds 6"},
        {"stride_overflow", "pytorch.tensor_out_of_bounds",
         "tensor 'w' (shape (3, 3), stride (9223372036854775807, 9223372036854775807), storage offset 0) reaches element beyond 2^64 of storage '0', which holds 6"},
        {"negative_size", "pytorch.bad_tensor", "tensor 'w' has size -2 in dimension 0 (shape (-2, 3)), expected >= 0"},
        {"negative_stride", "pytorch.bad_tensor", "tensor 'w' has stride -1 in dimension 1, expected >= 0"},
        {"negative_offset", "pytorch.bad_tensor", "tensor 'w' has storage offset -1, expected >= 0"},
        {"size_overflow", "pytorch.size_overflow", "tensor 'w' shape (4611686018427387904, 4, 4) has more than 2^63 elements"},
        {"bytes_overflow", "pytorch.size_overflow", "tensor 'w' shape (4611686018427387904,) has more than 2^63 bytes"},
        {"copy_limit", "pytorch.copy_limit",
         "tensor 'w' is a strided view that needs a 4398046511104-byte contiguous copy, beyond the limit of the file size (671 bytes) for all copies together"},
    };
    test::check_catalogue(
        cases, [&](const case_t& c) { return pt_dir + "/malformed/" + c.file + ".bin"; },
        [](const std::string& path) { io::read_pytorch_bin(path); });
    CHECK(test::count_files(pt_dir + "/malformed", ".bin") == std::size(cases));

    const std::string nowhere = pt_dir + "/absent.bin";
    check_error([&] { io::read_pytorch_bin(nowhere); }, "io.open_failed", nowhere + ": cannot open (No such file or directory)");
}

TEST_CASE("pytorch: views of one storage, strides, offsets and integer buffers") {
    const std::string path = pt_dir + "/views.bin";
    const auto recs = io::read_pytorch_bin(path);
    const char* order[] = {"base",  "transposed", "slice",  "column", "block", "scalar",
                           "empty", "expanded",   "half_t", "ids",    "mask",  "param"};
    REQUIRE(recs.size() == std::size(order));
    for (std::size_t i = 0; i < recs.size(); ++i) {
        CHECK(recs[i].name == order[i]);  // state dict order
        CHECK(recs[i].source == path);
        CHECK(recs[i].nbytes == static_cast<std::size_t>(recs[i].shape.numel()) * size_of(recs[i].type));
    }
    const auto r = by_name(recs);
    auto values = [&](const char* name, dtype t, shape_t shape, const std::vector<float>& want) {
        CAPTURE(name);
        const tensor_record& x = *r.at(name);
        CHECK(x.type == t);
        CHECK(x.shape == shape);
        CHECK(as_floats(x) == want);
    };
    // base = arange(24).reshape(4, 6): element (i, j) is 6i + j.
    std::vector<float> base(24), transposed, slice, column, block;
    for (int i = 0; i < 24; ++i) base[i] = static_cast<float>(i);
    for (int c = 0; c < 6; ++c)
        for (int i = 0; i < 4; ++i) transposed.push_back(static_cast<float>(6 * i + c));
    for (int i = 6; i < 18; ++i) slice.push_back(static_cast<float>(i));
    for (int i = 0; i < 4; ++i) column.push_back(static_cast<float>(6 * i + 2));
    for (int i = 1; i < 4; ++i)
        for (int j = 2; j < 5; ++j) block.push_back(static_cast<float>(6 * i + j));
    values("base", dtype::f32, {4, 6}, base);
    values("transposed", dtype::f32, {6, 4}, transposed);
    values("slice", dtype::f32, {2, 6}, slice);
    values("column", dtype::f32, {4}, column);
    values("block", dtype::f32, {3, 3}, block);
    values("scalar", dtype::f32, {}, {15.0f});
    values("empty", dtype::f32, {4, 0}, {});
    values("expanded", dtype::f32, {4, 3}, {0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2});
    values("half_t", dtype::f16, {6, 4}, transposed);
    values("param", dtype::f32, {2}, {0.5f, -1.5f});
    CHECK(r.at("ids")->type == dtype::i64);
    CHECK(r.at("ids")->shape == shape_t{5});
    std::int64_t ids[5];
    std::memcpy(ids, r.at("ids")->bytes, sizeof ids);
    CHECK(std::vector<std::int64_t>(ids, ids + 5) == std::vector<std::int64_t>{-2, -1, 0, 1, 2});
    CHECK(r.at("mask")->type == dtype::boolean);
    CHECK(std::memcmp(r.at("mask")->bytes, "\x01\x00\x01", 3) == 0);

    // Contiguous views point into the mapping (shared owner); strided views own a copy.
    const tensor_record& b = *r.at("base");
    CHECK(r.at("slice")->bytes == b.bytes + 6 * 4);
    CHECK(r.at("scalar")->bytes == b.bytes + 15 * 4);
    CHECK(r.at("slice")->owner == b.owner);
    CHECK(r.at("transposed")->owner != b.owner);
    CHECK(r.at("transposed")->owner.get() != nullptr);
    CHECK(r.at("expanded")->owner != b.owner);

    // ZIP64 everywhere (sizes, offsets, end records): the same tensors.
    const auto z = io::read_pytorch_bin(pt_dir + "/zip64.bin");
    REQUIRE(z.size() == recs.size());
    for (std::size_t i = 0; i < z.size(); ++i) {
        CAPTURE(z[i].name);
        CHECK(same_record(z[i], recs[i]));
    }
}

TEST_CASE("pytorch: module state dicts, nested checkpoints, protocol 4, torch 2 layout") {
    // nn.Sequential(Linear(3, 2), LayerNorm(2)).state_dict(): an OrderedDict with _metadata (BUILD).
    const auto m = io::read_pytorch_bin(pt_dir + "/module.bin");
    REQUIRE(m.size() == 4);
    CHECK(m[0].name == "0.weight");
    CHECK(m[0].shape == shape_t{2, 3});
    CHECK(as_floats(m[0]) == std::vector<float>{0.25f, -0.5f, 1.0f, 2.0f, -4.0f, 0.125f});
    CHECK(m[1].name == "0.bias");
    CHECK(as_floats(m[1]) == std::vector<float>{0.5f, -0.75f});
    CHECK(m[2].name == "1.weight");
    CHECK(as_floats(m[2]) == std::vector<float>{1.5f, 2.5f});
    CHECK(m[3].name == "1.bias");
    CHECK(as_floats(m[3]) == std::vector<float>{-1.0f, 1.0f});

    // The same pickle and storages in torch 2.x's layout ("archive/", byteorder, .data/).
    const auto t2 = io::read_pytorch_bin(pt_dir + "/torch2_layout.bin");
    REQUIRE(t2.size() == m.size());
    for (std::size_t i = 0; i < m.size(); ++i) CHECK(same_record(t2[i], m[i]));

    // {"epoch", "lr", "tags", "state_dict": {...}, ...}: read through "state_dict".
    const auto n = io::read_pytorch_bin(pt_dir + "/nested.bin");
    REQUIRE(n.size() == 2);
    CHECK(n[0].name == "w");
    CHECK(as_floats(n[0]) == std::vector<float>{1, 2, 3, 4});
    CHECK(n[1].name == "b");
    CHECK(as_floats(n[1]) == std::vector<float>{-1});

    // Protocol 4: FRAME, MEMOIZE, SHORT_BINUNICODE, STACK_GLOBAL.
    const auto p = io::read_pytorch_bin(pt_dir + "/protocol4.bin");
    REQUIRE(p.size() == 2);
    CHECK(p[0].name == "w");
    CHECK(as_floats(p[0]) == std::vector<float>{1, 2, 3});
    CHECK(p[1].name == "v");
    CHECK(p[1].shape == shape_t{2, 1});
    CHECK(as_floats(p[1]) == std::vector<float>{4, 5});
}

TEST_CASE("pytorch: float16 and bfloat16 storages, and torch's narrowing equals locost's") {
    // x = src.half() / src.bfloat16() by torch, over special values and 2021 random bit patterns.
    for (const dtype t : {dtype::f16, dtype::bf16}) {
        CAPTURE(safetensors_name(t));
        const auto recs = io::read_pytorch_bin(pt_dir + (t == dtype::f16 ? "/f16.bin" : "/bf16.bin"));
        const auto r = by_name(recs);
        const tensor_record& src = *r.at("src");
        const tensor_record& x = *r.at("x");
        REQUIRE(src.type == dtype::f32);
        REQUIRE(x.type == t);
        REQUIRE(x.shape == src.shape);
        REQUIRE(src.shape == shape_t{2048});
        std::size_t mismatches = 0;
        for (std::size_t i = 0; i < 2048; ++i) {
            float f;
            std::uint16_t h;
            std::memcpy(&f, src.bytes + 4 * i, 4);
            std::memcpy(&h, x.bytes + 2 * i, 2);
            const std::uint16_t ours = t == dtype::f16 ? float_to_f16(f) : float_to_bf16(f);
            if (ours != h && mismatches++ < 5) CHECK_MESSAGE(ours == h, "element " << i << " value " << f);
        }
        CHECK(mismatches == 0);
        // Widening back is exact: every narrow value is a float32 value.
        const auto wide = as_floats(x);
        for (std::size_t i = 0; i < 2048; ++i) {
            std::uint16_t h;
            std::memcpy(&h, x.bytes + 2 * i, 2);
            const std::uint16_t back = t == dtype::f16 ? float_to_f16(wide[i]) : float_to_bf16(wide[i]);
            if (back != h) {
                CHECK(back == h);
                break;
            }
        }
    }
}

TEST_CASE("pytorch: the tiny checkpoint as pytorch_model.bin is bit-identical to model.safetensors") {
    const std::string dir = pt_scratch("tiny_bin");
    fs::copy_file(pt_dir + "/tiny_locost.bin", dir + "/pytorch_model.bin");
    fs::copy_file(tiny_dir + "/config.json", dir + "/config.json");
    const auto ck = io::checkpoint::open(dir);
    CHECK(ck.weights_path() == dir + "/pytorch_model.bin");
    const auto v = test::validate(ck);
    CHECK(v.ok());
    CHECK(v.unexpected.empty());
    CHECK(v.warnings.empty());

    const auto st = safetensors_file::open(tiny_dir + "/model.safetensors");
    REQUIRE(ck.records().size() == st.records().size());
    for (const auto& r : ck.records()) {
        CAPTURE(r.name);
        const tensor_record* s = st.find(r.name);
        REQUIRE(s != nullptr);
        CHECK(same_record(r, *s));
        CHECK(r.source == dir + "/pytorch_model.bin");
    }
    // One storage under three names: the records point at the same mapped bytes, and the
    // checkpoint resolves the names to one record.
    const auto recs = by_name(ck.records());
    const std::byte* shared = recs.at("shared.weight")->bytes;
    CHECK(recs.at("encoder.embed_tokens.weight")->bytes == shared);
    CHECK(recs.at("decoder.embed_tokens.weight")->bytes == shared);
    const tensor_record& s = ck.record("shared.weight");
    CHECK(&ck.record("encoder.embed_tokens.weight") == &s);
    CHECK(&ck.record("decoder.embed_tokens.weight") == &s);
    CHECK(ck.record("lm_head.weight").bytes != shared);  // tie_word_embeddings false

    // Records outlive the reader and the checkpoint (they share the mapping).
    std::vector<tensor_record> kept;
    {
        const auto again = io::read_pytorch_bin(dir + "/pytorch_model.bin");
        kept.assign(again.begin(), again.end());
    }
    const auto w = as_floats(*by_name(kept).at("encoder.block.1.layer.0.ssm_layer.kernel.C"));
    CHECK(std::memcmp(w.data(), st.find("encoder.block.1.layer.0.ssm_layer.kernel.C")->bytes, w.size() * 4) == 0);
}

TEST_CASE("pytorch: .bin, F16, BF16 and sharded safetensors of the tiny checkpoint load alike") {
    const std::string bin = pt_scratch("agree_bin");
    fs::copy_file(pt_dir + "/tiny_locost.bin", bin + "/pytorch_model.bin");
    fs::copy_file(tiny_dir + "/config.json", bin + "/config.json");
    const auto ref = io::checkpoint::open(bin);
    const auto source = io::read_pytorch_bin(bin + "/pytorch_model.bin");

    // F16 and BF16 conversions, written from the .bin records; a two-shard split.
    std::map<dtype, std::string> narrow;
    for (const dtype t : {dtype::f16, dtype::bf16}) {
        const std::string dir = pt_scratch(std::string("agree_") + std::string(safetensors_name(t)));
        safetensors_writer w(t);
        for (const auto& r : source) {
            const auto f = as_floats(r);
            w.add(r.name, view<const float>{f.data(), r.shape});
        }
        w.write(dir + "/model.safetensors");
        fs::copy_file(tiny_dir + "/config.json", dir + "/config.json");
        narrow[t] = dir;
    }
    const std::string sharded = pt_scratch("agree_sharded");
    {
        safetensors_writer a, b;
        io::json weight_map = io::json::object();
        for (const auto& r : source) {
            const bool first = r.name.starts_with("encoder.");
            (first ? a : b).add(r.name, r.type, r.shape, std::span(r.bytes, r.nbytes));
            weight_map[r.name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
        }
        a.write(sharded + "/model-00001-of-00002.safetensors");
        b.write(sharded + "/model-00002-of-00002.safetensors");
        std::ofstream(sharded + "/model.safetensors.index.json") << io::json{{"weight_map", weight_map}}.dump(1);
        fs::copy_file(tiny_dir + "/config.json", sharded + "/config.json");
    }

    const auto f16 = io::checkpoint::open(narrow[dtype::f16]);
    const auto bf16 = io::checkpoint::open(narrow[dtype::bf16]);
    const auto sh = io::checkpoint::open(sharded);
    for (const auto* ck : {&f16, &bf16, &sh}) {
        CHECK(test::validate(*ck).ok());
        CHECK(test::validate(*ck).unexpected.empty());
        CHECK(&ck->record("decoder.embed_tokens.weight") == &ck->record("shared.weight"));
    }
    std::size_t elements = 0;
    for (const auto& p : test::expected_parameters(ref)) {
        CAPTURE(p.name);
        const auto x = ref.load_f32(p.name, p.shape);
        const auto h = f16.load_f32(p.name, p.shape);
        const auto g = bf16.load_f32(p.name, p.shape);
        const auto s = sh.load_f32(p.name, p.shape);
        CHECK(f16.record(p.name).type == dtype::f16);
        CHECK(bf16.record(p.name).type == dtype::bf16);
        CHECK(std::memcmp(s.data(), x.data(), static_cast<std::size_t>(x.numel()) * 4) == 0);
        bool ok = true;
        for (index_t i = 0; i < x.numel() && ok; ++i) {
            const float wh = f16_to_float(float_to_f16(x[i])), wg = bf16_to_float(float_to_bf16(x[i]));
            ok = std::memcmp(&h[i], &wh, 4) == 0 && std::memcmp(&g[i], &wg, 4) == 0;
        }
        CHECK(ok);
        elements += static_cast<std::size_t>(x.numel());
    }
    // Every parameter element: the file's floats less the two stored embedding copies.
    CHECK(elements == (1316864 - 2 * 512 * 64 * 4) / 4);
}

TEST_CASE("pytorch: in-memory images, truncated or corrupted anywhere, never read out of bounds") {
    for (const char* name : {"views.bin", "zip64.bin", "nested.bin"}) {
        CAPTURE(name);
        const auto image = file_bytes(pt_dir + "/" + name);
        REQUIRE(!image.empty());
        CHECK(try_parse(image.data(), image.size()));
        // Every proper prefix is rejected.
        for (std::size_t len = 0; len < image.size(); ++len)
            if (try_parse(image.data(), len)) CHECK_MESSAGE(false, "prefix of length " << len << " was accepted");
        // Every byte replaced by 0x00, 0xff and its complement: a record or a locost::error.
        std::vector<std::byte> bad = image;
        for (std::size_t i = 0; i < bad.size(); ++i) {
            const std::byte keep = bad[i];
            for (const std::byte b : {std::byte{0}, std::byte{0xff}, ~keep}) {
                bad[i] = b;
                (void)try_parse(bad.data(), bad.size());
            }
            bad[i] = keep;
        }
    }
    // No owner: records of the caller's buffer.
    const auto image = file_bytes(pt_dir + "/module.bin");
    const auto recs = io::read_pytorch_bin_buffer(image.data(), image.size(), "module", nullptr);
    REQUIRE(recs.size() == 4);
    CHECK(recs[0].source == "module");
    CHECK(recs[0].bytes >= image.data());
    CHECK(recs[0].bytes + recs[0].nbytes <= image.data() + image.size());
}
