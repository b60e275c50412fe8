#!/usr/bin/python3
"""Writes the PyTorch .bin files that tests/io/test_pytorch.cpp reads, and the pytorch fuzz seeds.

Run with Debian's python3 (python3-torch 1.13, python3-numpy), from anywhere:
    /usr/bin/python3 tests/data/pytorch/make_pytorch_files.py
Deterministic: the same bytes on every run (torch.save writes no timestamps; everything else is
assembled here). It rewrites, next to this script:
  tiny_locost.bin     tests/data/reference/tiny_locost/model.safetensors re-saved with torch.save
                      as an OrderedDict; the three tied embedding names share ONE storage (one
                      name is the same tensor object, one a detached view, as state_dict() gives)
  f16.bin, bf16.bin   {"src": float32 values, "x": src.half() / src.bfloat16()}: torch's own
                      narrowing, to check locost's against it
  views.bin           views of one storage (transpose, slices, column, scalar, empty), an
                      expanded (stride 0) tensor, a transposed float16 view, int64 and bool
                      buffers, a Parameter; a plain dict root
  module.bin          nn.Sequential(Linear, LayerNorm).state_dict() (OrderedDict + _metadata,
                      so BUILD), deterministic values
  nested.bin          {"epoch": 3, "lr": 0.5, "tags": [...], "state_dict": {...}}
  protocol4.bin       torch.save(..., pickle_protocol=4): FRAME, MEMOIZE, STACK_GLOBAL
  zip64.bin           views.bin's entries re-zipped by zip_image() with every ZIP64 field
  torch2_layout.bin   module.bin's pickle and storages in torch 2.x's layout: folder "archive",
                      "byteorder", ".data/serialization_id", sizes in the local headers
  malformed/*.bin     one broken file per error the reader reports (test_pytorch.cpp lists each
                      with its exact id and message)
and copies the small valid files to tests/fuzz/corpus/pytorch/ as fuzz seeds.
Every valid file is checked here with Python's zipfile and torch.load.
"""
import collections
import io
import json
import os
import shutil
import struct
import sys
import zlib

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
TINY = os.path.join(ROOT, "tests", "data", "reference", "tiny_locost", "model.safetensors")
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus", "pytorch")


def out(rel):
    path = os.path.join(HERE, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def write(rel, data):
    with open(out(rel), "wb") as f:
        f.write(bytes(data))


def read(rel):
    with open(out(rel), "rb") as f:
        return f.read()


# ---- a zip writer with every knob (torch.save's own layout by default) ---------------------

def zip_image(entries, zip64=False, descriptor=True, align=64, comment=b""):
    """entries: list of (name, data). Returns (bytearray, layout): layout["entries"][i] has
    "header" (local header offset), "data" (data offset), "central" (central entry offset);
    layout has "cd", "cd_size", "end64" (ZIP64 record or None), "locator", "eocd".
    descriptor=True writes as torch does: flags bit 3, zero sizes and CRC in the local header,
    a data descriptor after the data, and "FB" padding extra fields aligning data to `align`.
    zip64=True marks every size and offset 0xFFFFFFFF and puts the values in ZIP64 extra
    fields and records (local headers then carry their sizes in their ZIP64 extra)."""
    img = bytearray()
    layout = {"entries": []}
    for name, data in entries:
        name = name.encode() if isinstance(name, str) else name
        crc = zlib.crc32(data)
        header = len(img)
        flags = 0x0808 if descriptor else 0x0800
        extra = b""
        if zip64:
            extra += struct.pack("<HHQQ", 1, 16, len(data), len(data))
            csize = usize = 0xFFFFFFFF
        else:
            csize = usize = 0 if descriptor else len(data)
        if align:
            start = header + 30 + len(name) + len(extra) + 4
            pad = -start % align
            extra += b"FB" + struct.pack("<H", pad) + b"Z" * pad
        img += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45 if zip64 else 20, flags, 0, 0, 0x21,
                           0 if descriptor else crc, csize, usize, len(name), len(extra))
        img += name + extra
        data_at = len(img)
        img += data
        if descriptor:
            if zip64:
                img += struct.pack("<IIQQ", 0x08074B50, crc, len(data), len(data))
            else:
                img += struct.pack("<IIII", 0x08074B50, crc, len(data), len(data))
        layout["entries"].append({"name": name, "header": header, "data": data_at, "size": len(data),
                                  "crc": crc, "flags": flags})
    cd = len(img)
    for e in layout["entries"]:
        e["central"] = len(img)
        if zip64:
            extra = struct.pack("<HHQQQ", 1, 24, e["size"], e["size"], e["header"])
            csize = usize = offset = 0xFFFFFFFF
        else:
            extra = b""
            csize = usize = e["size"]
            offset = e["header"]
        img += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45 if zip64 else 20, 45 if zip64 else 20,
                           e["flags"], 0, 0, 0x21, e["crc"], csize, usize, len(e["name"]), len(extra), 0, 0, 0, 0,
                           offset)
        img += e["name"] + extra
    cd_size = len(img) - cd
    n = len(entries)
    layout.update(cd=cd, cd_size=cd_size, end64=None, locator=None)
    if zip64:
        layout["end64"] = len(img)
        img += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, cd_size, cd)
        layout["locator"] = len(img)
        img += struct.pack("<IIQI", 0x07064B50, 0, layout["end64"], 1)
        counts, size32, off32 = 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF
    else:
        counts, size32, off32 = n, cd_size, cd
    layout["eocd"] = len(img)
    img += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, counts, counts, size32, off32, len(comment)) + comment
    return img, layout


def torch_zip_entries(path):
    with open(path, "rb") as f:
        img = f.read()
    import zipfile
    z = zipfile.ZipFile(path)
    return [(i.filename, z.read(i.filename)) for i in z.infolist()], img


def same_state(a, b):
    assert list(a.keys()) == list(b.keys()), (list(a.keys()), list(b.keys()))
    for k in a:
        x, y = a[k], b[k]
        assert x.dtype == y.dtype and x.shape == y.shape and x.stride() == y.stride(), k
        if x.is_floating_point():  # NaN where NaN, equal elsewhere
            assert torch.equal(x.isnan(), y.isnan()) and torch.equal(x[~x.isnan()], y[~y.isnan()]), k
        else:
            assert torch.equal(x, y), k


def check_valid(rel, expect=None):
    """zipfile and torch.load read the file; torch's view of it matches `expect` when given."""
    import zipfile
    path = out(rel)
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None, rel
    got = torch.load(path)
    if expect is not None:
        if "state_dict" in expect:
            got, expect = got["state_dict"], expect["state_dict"]
        same_state(got, expect)
    return got


# ---- a small pickle assembler for the malformed cases -------------------------------------

class P:
    def __init__(self, proto=2):
        self.b = bytearray(b"\x80" + bytes([proto])) if proto is not None else bytearray()

    def op(self, code, arg=b""):
        self.b += bytes([code]) if isinstance(code, int) else code
        self.b += arg
        return self

    def mark(self): return self.op(b"(")
    def stop(self): return self.op(b".")
    def empty_dict(self): return self.op(b"}")
    def empty_list(self): return self.op(b"]")
    def empty_tuple(self): return self.op(b")")
    def tuple(self): return self.op(b"t")
    def tuple2(self): return self.op(0x86)
    def tuple3(self): return self.op(0x87)
    def reduce(self): return self.op(b"R")
    def setitem(self): return self.op(b"s")
    def setitems(self): return self.op(b"u")
    def persid(self): return self.op(b"Q")
    def newfalse(self): return self.op(0x89)
    def none(self): return self.op(b"N")
    def build(self): return self.op(b"b")

    def str(self, s):
        s = s.encode() if isinstance(s, str) else s
        return self.op(b"X", struct.pack("<I", len(s)) + s)

    def int(self, v):
        if 0 <= v < 256:
            return self.op(b"K", bytes([v]))
        if -2**31 <= v < 2**31:
            return self.op(b"J", struct.pack("<i", v))
        n = (v.bit_length() + 8) // 8
        return self.op(0x8A, bytes([n]) + v.to_bytes(n, "little", signed=True))

    def ints(self, vs):
        self.mark()
        for v in vs:
            self.int(v)
        return self.tuple()

    def glob(self, module, name): return self.op(b"c", module.encode() + b"\n" + name.encode() + b"\n")
    def put(self, i): return self.op(b"q", bytes([i]))
    def get(self, i): return self.op(b"h", bytes([i]))

    def storage(self, key, numel, type_name="FloatStorage"):
        self.mark().str("storage").glob("torch", type_name).str(key).str("cpu").int(numel).tuple()
        return self.persid()

    def tensor(self, key, numel, offset, size, stride, type_name="FloatStorage"):
        """_rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())"""
        self.glob("torch._utils", "_rebuild_tensor_v2").mark()
        self.storage(key, numel, type_name).int(offset).ints(size).ints(stride).newfalse()
        self.glob("collections", "OrderedDict").empty_tuple().reduce()
        return self.tuple().reduce()

    def state_dict(self, items):
        """items: list of (key, callable adding the value)."""
        self.glob("collections", "OrderedDict").empty_tuple().reduce().mark()
        for k, add in items:
            self.str(k) if isinstance(k, str) else self.int(k)
            add(self)
        return self.setitems().stop()

    def bytes(self):
        return bytes(self.b)


def f32(*v):
    return struct.pack("<%df" % len(v), *v)


W = f32(*range(6))  # the one storage of the base case: w = arange(6).reshape(2, 3)


def w_tensor(p):
    return p.tensor("0", 6, 0, (2, 3), (3, 1))


def bin_image(pkl, storages=None, folder="archive", extra=(), **kw):
    entries = [(folder + "/data.pkl", pkl)]
    for key, data in (storages if storages is not None else [("0", W)]):
        entries.append((folder + "/data/" + key, data))
    entries += list(extra)
    entries.append((folder + "/version", b"3\n"))
    return zip_image(entries, **kw)


BASE_PKL = P().state_dict([("w", w_tensor)]).bytes()


def base():
    return bin_image(BASE_PKL)


# ---- valid files ---------------------------------------------------------------------------

def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    tensors = collections.OrderedDict()
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", name
        b, end = e["data_offsets"]
        a = np.frombuffer(raw, dtype="<f4", count=(end - b) // 4, offset=8 + n + b).reshape(e["shape"]).copy()
        tensors[name] = torch.from_numpy(a)
    return tensors


def lcg_floats(n, seed):
    """n float32 values from random bit patterns (every exponent: zeros, subnormals, huge)."""
    x, bits = seed, []
    for _ in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) % 2**64
        b = x >> 32
        if (b & 0x7F800000) == 0x7F800000:  # no inf/nan from the generator; specials are listed
            b &= 0xBF7FFFFF
        bits.append(b)
    return np.array(bits, dtype="<u4").view("<f4")


SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, 1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-8, 1 + 3 * 2**-8, 65504.0, 65519.0,
            65520.0, 1e5, 2**-14, 2**-24, 2**-25, 1.5 * 2**-25, 2**-26, 3e-8, 0.1, 1 / 3, 3.14159265,
            float("inf"), float("-inf"), 3.3895313892515355e38, 1e-40, -1e-45]


def valid_files():
    tiny = read_safetensors(TINY)
    sd = collections.OrderedDict(tiny)
    sd["encoder.embed_tokens.weight"] = sd["shared.weight"]            # the same tensor object
    sd["decoder.embed_tokens.weight"] = sd["shared.weight"].detach()   # a new view of the same storage
    torch.save(sd, out("tiny_locost.bin"))
    got = check_valid("tiny_locost.bin", sd)
    ptrs = {got[k].data_ptr() for k in ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight")}
    assert len(ptrs) == 1

    src = np.concatenate([np.array(SPECIALS, dtype="<f4"), lcg_floats(2048 - len(SPECIALS), 12345)])
    src = torch.from_numpy(src.copy())
    for name, t in (("f16.bin", torch.float16), ("bf16.bin", torch.bfloat16)):
        d = {"src": src, "x": src.to(t)}
        torch.save(d, out(name))
        check_valid(name, d)

    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    views = {
        "base": base,
        "transposed": base.t(),
        "slice": base[1:3],
        "column": base[:, 2],
        "block": base[1:, 2:5],
        "scalar": base[2, 3],
        "empty": base[:, 6:],
        "expanded": torch.arange(3, dtype=torch.float32).expand(4, 3),
        "half_t": base.to(torch.float16).t(),
        "ids": torch.arange(5, dtype=torch.int64) - 2,
        "mask": torch.tensor([True, False, True]),
        "param": torch.nn.Parameter(torch.tensor([0.5, -1.5])),
    }
    torch.save(views, out("views.bin"))
    check_valid("views.bin", {k: v.detach() for k, v in views.items()})

    m = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.LayerNorm(2))
    with torch.no_grad():
        m[0].weight.copy_(torch.tensor([[0.25, -0.5, 1.0], [2.0, -4.0, 0.125]]))
        m[0].bias.copy_(torch.tensor([0.5, -0.75]))
        m[1].weight.copy_(torch.tensor([1.5, 2.5]))
        m[1].bias.copy_(torch.tensor([-1.0, 1.0]))
    msd = m.state_dict()
    torch.save(msd, out("module.bin"))
    check_valid("module.bin", msd)

    nested = {"epoch": 3, "lr": 0.5, "tags": ["a", "b"], "state_dict": collections.OrderedDict(
        [("w", torch.tensor([[1.0, 2.0], [3.0, 4.0]])), ("b", torch.tensor([-1.0]))]), "flag": None, "big": 2**40}
    torch.save(nested, out("nested.bin"))
    check_valid("nested.bin", nested)

    p4 = collections.OrderedDict([("w", torch.tensor([1.0, 2.0, 3.0])), ("v", torch.tensor([[4.0], [5.0]]))])
    torch.save(p4, out("protocol4.bin"), pickle_protocol=4)
    check_valid("protocol4.bin", p4)

    entries, _ = torch_zip_entries(out("views.bin"))
    img, _ = zip_image(entries, zip64=True)
    write("zip64.bin", img)
    check_valid("zip64.bin", {k: v.detach() for k, v in views.items()})

    entries, _ = torch_zip_entries(out("module.bin"))
    renamed = [("archive/" + n.split("/", 1)[1], d) for n, d in entries if not n.endswith("/version")]
    renamed += [("archive/byteorder", b"little"), ("archive/version", b"3\n"),
                ("archive/.data/serialization_id", b"0123456789012345678901234567890123456789")]
    img, _ = zip_image(renamed, descriptor=False, align=0)
    write("torch2_layout.bin", img)
    check_valid("torch2_layout.bin", msd)


# ---- malformed files -----------------------------------------------------------------------

def patch(img, fmt, offset, *values):
    struct.pack_into(fmt, img, offset, *values)
    return img


def malformed_files():
    cases = {}

    # Not a (whole) zip archive.
    good, lay = base()
    cases["empty"] = b""
    cases["not_zip"] = b"this is not a zip archive, nor a pickle\n" * 3
    cases["truncated_1"] = good[:1]
    cases["truncated_in_data"] = good[:lay["entries"][1]["data"] + 5]
    cases["truncated_in_central"] = good[:lay["cd"] + 30]
    cases["truncated_in_end"] = good[:-5]
    # The legacy format names storages by object address: keep its deterministic head, the
    # magic-number, protocol-version and sys_info pickles (all the reader looks at is byte 0).
    legacy = io.BytesIO()
    torch.save({"w": torch.zeros(2)}, legacy, _use_new_zipfile_serialization=False)
    head = legacy.getvalue()
    cut = 0
    for _ in range(3):
        cut = head.index(b".", head.index(b"\x80\x02", cut)) + 1  # each of the three pickles ends at its STOP
    assert head[:4] == b"\x80\x02\x8a\x0a", head[:16]
    cases["legacy"] = head[:cut]

    # End of central directory records.
    img, lay = base()
    cases["cd_offset_out_of_bounds"] = patch(img, "<I", lay["eocd"] + 16, len(img))
    img, lay = base()
    cases["cd_size_out_of_bounds"] = patch(img, "<I", lay["eocd"] + 12, lay["cd_size"] + 1000)
    img, lay = base()
    cases["entry_count_too_large"] = patch(img, "<HH", lay["eocd"] + 8, 60000, 60000)
    img, lay = base()
    cases["entry_count_too_small"] = patch(img, "<HH", lay["eocd"] + 8, 2, 2)
    img, lay = base()
    cases["multi_disk"] = patch(img, "<H", lay["eocd"] + 4, 1)

    # Central directory entries.
    img, lay = base()
    cases["central_bad_signature"] = patch(img, "<I", lay["entries"][1]["central"], 0x02014B51)
    img, lay = bin_image(BASE_PKL, extra=[("archive/data/1", W)])
    c = lay["entries"][2]["central"]
    img[c + 46:c + 46 + 14] = b"archive/data/0"
    cases["duplicate_entry"] = img

    # Local headers.
    img, lay = base()
    cases["local_bad_signature"] = patch(img, "<I", lay["entries"][1]["header"], 0x04034B51)
    img, lay = base()
    h = lay["entries"][1]["header"]
    cases["local_name_mismatch"] = patch(img, "<c", h + 30 + len("archive/data/"), b"9")
    img, lay = bin_image(BASE_PKL, descriptor=False)
    cases["local_size_mismatch"] = patch(img, "<I", lay["entries"][1]["header"] + 22, 20)
    img, lay = base()
    cases["local_method_mismatch"] = patch(img, "<H", lay["entries"][1]["header"] + 8, 8)
    img, lay = base()
    cases["local_header_out_of_bounds"] = patch(img, "<I", lay["entries"][1]["central"] + 42, lay["cd"] - 10)
    img, lay = base()
    e = lay["entries"][1]
    cases["entry_out_of_bounds"] = patch(img, "<II", e["central"] + 20, lay["cd"] - e["data"] + 1,
                                         lay["cd"] - e["data"] + 1)
    img, lay = base()
    e = lay["entries"][0]
    grow = lay["entries"][1]["header"] - e["data"] + 1
    cases["entries_overlap"] = patch(img, "<II", e["central"] + 20, grow, grow)

    # Entries locost does not read.
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    packed = deflate.compress(BASE_PKL) + deflate.flush()
    img, lay = bin_image(packed)
    for at in (lay["entries"][0]["header"] + 8, lay["entries"][0]["central"] + 10):
        patch(img, "<H", at, 8)
    patch(img, "<I", lay["entries"][0]["central"] + 24, len(BASE_PKL))
    cases["compressed_entry"] = img
    img, lay = base()
    for at in (lay["entries"][1]["header"] + 6, lay["entries"][1]["central"] + 8):
        patch(img, "<H", at, 0x0809)
    cases["encrypted_entry"] = img

    # ZIP64.
    img, lay = bin_image(BASE_PKL, zip64=True)
    cases["zip64_offset_mismatch"] = patch(img, "<I", lay["eocd"] + 16, lay["cd"] + 4)
    img, lay = bin_image(BASE_PKL, zip64=True)
    cases["zip64_locator_out_of_bounds"] = patch(img, "<Q", lay["locator"] + 8, lay["locator"] - 40)
    img, lay = bin_image(BASE_PKL, zip64=True)
    cases["zip64_bad_signature"] = patch(img, "<I", lay["end64"], 0x06064B51)
    img, lay = bin_image(BASE_PKL, zip64=True)
    cases["zip64_count_lies"] = patch(img, "<QQ", lay["end64"] + 24, 2**60, 2**60)
    img, lay = bin_image(BASE_PKL, zip64=True)
    cases["zip64_cd_size_lies"] = patch(img, "<Q", lay["end64"] + 40, 2**63 + 5)
    img, lay = bin_image(BASE_PKL, zip64=True)
    e, n = lay["entries"][1], len("archive/data/0")
    for at in (e["central"] + 46 + n + 4, e["header"] + 30 + n + 4):  # both ZIP64 extras lie alike
        patch(img, "<QQ", at, 2**64 - 2, 2**64 - 2)
    cases["zip64_extra_size_lies"] = img
    img, lay = bin_image(BASE_PKL, zip64=True)
    cases["zip64_extra_offset_lies"] = patch(img, "<Q", lay["entries"][1]["central"] + 46 + len("archive/data/0") + 20,
                                             2**64 - 16)
    img, lay = bin_image(BASE_PKL, zip64=True)
    cases["zip64_extra_short"] = patch(img, "<H", lay["entries"][1]["central"] + 46 + len("archive/data/0") + 2, 8)
    img, lay = bin_image(BASE_PKL, zip64=True)
    c = lay["entries"][1]["central"]
    patch(img, "<H", c + 30, 0)  # drop the extra field (the bytes stay, as the entry's comment)
    cases["zip64_missing_extra"] = patch(img, "<H", c + 32, 28)

    # Archive layout.
    img, _ = zip_image([("archive/data/0", W), ("archive/version", b"3\n")])
    cases["missing_data_pkl"] = img
    img, _ = zip_image([("a/data.pkl", BASE_PKL), ("a/data/0", W), ("b/data.pkl", BASE_PKL)])
    cases["two_data_pkl"] = img
    img, _ = bin_image(BASE_PKL, storages=[])
    cases["missing_storage"] = img
    img, _ = bin_image(BASE_PKL, extra=[("archive/byteorder", b"big")])
    cases["big_endian"] = img

    # The pickle machine.
    def pk(name, pickle_bytes, **kw):
        cases[name] = bin_image(pickle_bytes, **kw)[0]

    pk("os_system", P().glob("os", "system").mark().str("echo pwned").tuple().reduce().stop().bytes())
    pk("load_from_bytes", P().state_dict([("w", lambda p: p.glob("torch.storage", "_load_from_bytes")
                                           .mark().op(b"C", b"\x04abcd").tuple().reduce())]).bytes())
    pk("opcode_inst", P().op(b"i", b"os\nsystem\n").stop().bytes())
    pk("opcode_unknown", P().op(0x01).stop().bytes())
    pk("protocol_6", P(proto=6).empty_dict().stop().bytes())
    pk("no_stop", P().state_dict([("w", w_tensor)]).bytes()[:-1])
    pk("truncated_string", P().empty_dict().op(b"X", struct.pack("<I", 1000) + b"abc").bytes())
    pk("stack_underflow", P().glob("collections", "OrderedDict").reduce().stop().bytes())
    pk("mark_underflow", P().int(1).tuple().stop().bytes())
    pk("setitems_below_mark", P().empty_dict().mark().str("w").setitem().stop().bytes())
    pk("memo_missing", P().empty_dict().get(7).stop().bytes())
    pk("long_too_big", P().empty_dict().op(0x8A, b"\x09" + b"\x01" * 9).stop().bytes())
    pk("bad_utf8_key", P().empty_dict().mark().str(b"w\xff").op(b"K", b"\x01").setitems().stop().bytes())
    pk("setitems_odd", P().empty_dict().mark().str("w").setitems().stop().bytes())
    pk("reduce_not_callable", P().str("x").empty_tuple().reduce().stop().bytes())
    pk("build_on_list", P().empty_list().empty_dict().build().stop().bytes())
    pk("storage_called", P().glob("torch", "FloatStorage").empty_tuple().reduce().stop().bytes())
    pk("root_not_dict", P().empty_list().stop().bytes())
    pk("key_not_string", P().state_dict([(7, w_tensor)]).bytes())
    pk("not_a_tensor", P().state_dict([("w", lambda p: p.int(5))]).bytes())
    pk("duplicate_key", P().state_dict([("w", w_tensor), ("w", w_tensor)]).bytes())
    pk("persistent_id_short", P().state_dict([("w", lambda p: p.mark().str("storage").str("0").tuple().persid())]).bytes())
    pk("persistent_id_type", P().state_dict([("w", lambda p: p.glob("torch._utils", "_rebuild_tensor_v2").mark()
                                              .mark().str("storage").str("FloatStorage").str("0").str("cpu").int(6).tuple()
                                              .persid().int(0).ints((6,)).ints((1,)).newfalse().empty_dict().tuple()
                                              .reduce())]).bytes())
    pk("persistent_id_key_long", P().state_dict([("w", lambda p: p.tensor("k" * 300, 6, 0, (2, 3), (3, 1)))]).bytes())
    pk("tensor_args_count", P().state_dict([("w", lambda p: p.glob("torch._utils", "_rebuild_tensor_v2").mark()
                                             .storage("0", 6).int(0).ints((6,)).ints((1,)).newfalse().tuple()
                                             .reduce())]).bytes())
    pk("tensor_args_many", P().state_dict([("w", lambda p: p.glob("torch._utils", "_rebuild_tensor_v2").mark()
                                            .op(b"N" * 100).tuple().reduce())]).bytes())
    pk("tensor_size_not_tuple", P().state_dict([("w", lambda p: p.glob("torch._utils", "_rebuild_tensor_v2").mark()
                                                 .storage("0", 6).int(0).empty_list().ints((1,)).newfalse()
                                                 .empty_dict().tuple().reduce())]).bytes())
    pk("tensor_rank_65", P().state_dict([("w", lambda p: p.tensor("0", 6, 0, (1,) * 65, (1,) * 65))]).bytes())
    pk("stride_count", P().state_dict([("w", lambda p: p.tensor("0", 6, 0, (2, 3), (1,)))]).bytes())
    pk("unsupported_dtype", P().state_dict([("w", lambda p: p.tensor("0", 3, 0, (3,), (1,), "ComplexFloatStorage"))])
       .bytes(), storages=[("0", W)])
    pk("storage_size_mismatch", P().state_dict([("w", lambda p: p.tensor("0", 5, 0, (5,), (1,)))]).bytes())
    pk("storage_numel_overflow", P().state_dict([("w", lambda p: p.tensor("0", 2**62, 0, (1,), (1,)))]).bytes())
    pk("storage_conflict", P().state_dict([("w", w_tensor),
                                           ("h", lambda p: p.tensor("0", 12, 0, (12,), (1,), "HalfStorage"))]).bytes())
    pk("out_of_bounds", P().state_dict([("w", lambda p: p.tensor("0", 6, 0, (3, 3), (3, 1)))]).bytes())
    pk("out_of_bounds_offset", P().state_dict([("w", lambda p: p.tensor("0", 6, 4, (2, 3), (1, 2)))]).bytes())
    pk("negative_size", P().state_dict([("w", lambda p: p.tensor("0", 6, 0, (-2, 3), (3, 1)))]).bytes())
    pk("negative_stride", P().state_dict([("w", lambda p: p.tensor("0", 6, 5, (2, 3), (3, -1)))]).bytes())
    pk("negative_offset", P().state_dict([("w", lambda p: p.tensor("0", 6, -1, (2, 3), (3, 1)))]).bytes())
    pk("size_overflow", P().state_dict([("w", lambda p: p.tensor("0", 6, 0, (2**62, 4, 4), (0, 0, 0)))]).bytes())
    pk("bytes_overflow", P().state_dict([("w", lambda p: p.tensor("0", 6, 0, (2**62,), (0,)))]).bytes())
    pk("stride_overflow", P().state_dict([("w", lambda p: p.tensor("0", 6, 0, (3, 3), (2**63 - 1, 2**63 - 1)))]).bytes())
    pk("copy_limit", P().state_dict([("w", lambda p: p.tensor("0", 6, 0, (2**20, 2**20), (0, 0)))]).bytes())

    for name, data in cases.items():
        write("malformed/" + name + ".bin", data)
    return cases


def main():
    if os.path.isdir(out("malformed")):
        shutil.rmtree(out("malformed"))
    valid_files()
    malformed_files()
    os.makedirs(CORPUS, exist_ok=True)
    for f in ("views.bin", "module.bin", "nested.bin", "protocol4.bin", "zip64.bin", "torch2_layout.bin"):
        shutil.copy(out(f), os.path.join(CORPUS, f))
    print("wrote", HERE, "and", CORPUS)


if __name__ == "__main__":
    sys.exit(main())
