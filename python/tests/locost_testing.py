"""Shared by the Python module's tests (python/tests/test_*.py): where the references are (the C++
tests' tests/data, or LOCOST_TEST_DATA), reading them, the parity measure, and the checkpoints and
text the tests share. Imported by name: pytest puts python/tests on sys.path (it has no
__init__.py), as `import fuzz_arguments` relies on too.
"""
import json
import os
import struct

import numpy as np

DATA = os.environ.get("LOCOST_TEST_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data"))
HF = os.path.join(DATA, "hf")
TINY_LOCOST = os.path.join(DATA, "reference", "tiny_locost")

_DTYPES = {"F32": np.float32, "I64": np.int64, "F64": np.float64, "I32": np.int32}


def read_safetensors(path):
    """A safetensors file as {name: numpy array} (little-endian; the reference files' dtypes only)."""
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8 : 8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(blob[8 + n + a : 8 + n + b], dtype=_DTYPES[t["dtype"]]).reshape(t["shape"])
    return out


def max_rel(got, ref, keep=None):
    """max |got - ref| / max |ref| (over the positions `keep` marks)."""
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    assert got.shape == ref.shape
    if keep is not None:
        got, ref = got[keep], ref[keep]
    return float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))


def rows_of(ids, mask):
    return [[int(t) for t, m in zip(r, mr) if m] for r, mr in zip(ids, mask)]


BART = os.path.join(HF, "bart")
TEXT = "The quick brown fox jumps over the lazy dog, and the dog sleeps on in the afternoon sun. " * 3
