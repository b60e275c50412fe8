#!/usr/bin/env python3
"""Writes the malformed inputs that tests/io/test_safetensors.cpp and tests/io/test_config.cpp feed
to the readers, each of which must fail with one exact locost error id and message.

Deterministic: the same bytes on every run (no timestamps, no randomness). Run from anywhere:
    python3 tests/data/malformed/make_malformed.py
It rewrites safetensors/, index_*/ and config/ next to this script. Standard library only.
"""
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def st_bytes(header, data=b"", pad=True, length=None):
    """A safetensors image: header given as a str (written verbatim) or a dict (compact JSON)."""
    h = header if isinstance(header, (str, bytes)) else json.dumps(header, separators=(",", ":"))
    h = h.encode("utf-8") if isinstance(h, str) else h
    if pad:
        h += b" " * (-len(h) % 8)
    n = len(h) if length is None else length
    return struct.pack("<Q", n) + h + data


def f32(*values):
    return struct.pack("<%df" % len(values), *values)


def write(rel, content):
    path = os.path.join(HERE, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(content if isinstance(content, bytes) else content.encode("utf-8"))


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def safetensors_cases():
    w = entry("F32", [2], 0, 8)
    data = f32(1.0, 2.0)
    cases = {
        "too_small": b"\x08\x00\x00\x00\x00",
        "header_too_large": struct.pack("<Q", 100_000_001) + b"{}      ",
        "header_out_of_bounds": st_bytes("{}", pad=False, length=64) + b"  ",
        "empty_header": st_bytes("", length=0),
        "invalid_json": st_bytes('{"w": {"dtype": "F32",, }}'),
        "invalid_utf8_name": st_bytes(b'{"w\xff": {}}'),
        "number_overflow": st_bytes('{"w": {"dtype": "F32", "shape": [1e999], "data_offsets": [0, 0]}}'),
        "too_deep": st_bytes("[" * 70 + "]" * 70),
        "not_object": st_bytes("[1, 2]"),
        "duplicate_name": st_bytes('{"w": %s, "w": %s}' % (json.dumps(w), json.dumps(w)), data),
        "metadata_not_object": st_bytes({"__metadata__": ["a"], "w": w}, data),
        "metadata_value_not_string": st_bytes({"__metadata__": {"format": 1}, "w": w}, data),
        "entry_not_object": st_bytes({"w": 5}),
        "missing_dtype": st_bytes({"w": {"shape": [2], "data_offsets": [0, 8]}}, data),
        "dtype_not_string": st_bytes({"w": {"dtype": 4, "shape": [2], "data_offsets": [0, 8]}}, data),
        "shape_not_array": st_bytes({"w": {"dtype": "F32", "shape": "2", "data_offsets": [0, 8]}}, data),
        "offsets_not_array": st_bytes({"w": {"dtype": "F32", "shape": [2], "data_offsets": {"begin": 0}}}, data),
        "unknown_dtype": st_bytes({"w": entry("F8_E4M3", [8], 0, 8)}, data),
        "negative_shape": st_bytes({"w": entry("F32", [2, -1], 0, 8)}, data),
        "float_shape": st_bytes({"w": entry("F32", [2.0], 0, 8)}, data),
        "offsets_three": st_bytes({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4, 8]}}, data),
        "offsets_negative": st_bytes({"w": entry("F32", [2], -8, 0)}, data),
        "offsets_reversed": st_bytes({"w": entry("F32", [2], 8, 0)}, data),
        "offsets_out_of_bounds": st_bytes({"w": entry("F32", [100], 0, 400)}, data),
        "size_mismatch": st_bytes({"w": entry("F32", [3], 0, 8)}, data),
        "size_overflow": st_bytes({"w": entry("F32", [2**62, 16], 0, 8)}, data),
        "overlap": st_bytes({"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 4, 12)}, f32(1, 2, 3)),
        "hole": st_bytes({"a": entry("F32", [1], 0, 4), "b": entry("F32", [1], 8, 12)}, f32(1, 2, 3)),
        "trailing_bytes": st_bytes({"a": entry("F32", [1], 0, 4)}, f32(1, 2)),
    }
    shutil.rmtree(os.path.join(HERE, "safetensors"), ignore_errors=True)
    for name, content in cases.items():
        write("safetensors/%s.safetensors" % name, content)


def shard(names):
    """A valid shard holding F32 tensors of shape (2,) named `names`."""
    header, data = {}, b""
    for i, n in enumerate(names):
        header[n] = entry("F32", [2], 8 * i, 8 * i + 8)
        data += f32(float(i), float(i) + 0.5)
    return st_bytes(header, data)


def index_cases():
    a, b = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    cases = {
        # name: (index content, {shard file: tensor names})
        "index_escape": ({"weight_map": {"x": "../x.safetensors"}}, {}),
        "index_absolute": ({"weight_map": {"x": "/etc/passwd"}}, {}),
        "index_missing_tensor": ({"weight_map": {"x": a, "y": b}}, {a: ["x"], b: []}),
        "index_unlisted_tensor": ({"weight_map": {"x": a}}, {a: ["x", "z"]}),
        "index_wrong_shard": ({"weight_map": {"x": a, "y": b}}, {a: ["x", "y"], b: ["y"]}),
        "index_no_weight_map": ({"metadata": {"total_size": 8}}, {}),
        "index_not_string": ({"weight_map": {"x": 1}}, {}),
        "index_empty": ({"metadata": {}, "weight_map": {}}, {}),
        "index_missing_shard": ({"weight_map": {"x": a}}, {}),
    }
    for d in os.listdir(HERE):
        if d.startswith("index_"):
            shutil.rmtree(os.path.join(HERE, d))
    for name, (index, shards) in cases.items():
        write("%s/model.safetensors.index.json" % name, json.dumps(index, indent=1) + "\n")
        for f, names in shards.items():
            write("%s/%s" % (name, f), shard(names))


TINY = {
    "model_type": "locost", "vocab_size": 512, "d_model": 64, "d_state": 16, "d_kv": 16,
    "d_ff": 128, "num_layers": 2, "num_heads": 4, "num_ssm_heads": 1,
}


def config_cases():
    def edit(**kw):
        c = dict(TINY)
        for k, v in kw.items():
            if v is None:
                c.pop(k)
            else:
                c[k] = v
        return json.dumps(c, indent=1) + "\n"

    cases = {
        "missing_d_model": edit(d_model=None),
        "d_model_string": edit(d_model="64"),
        "d_model_float": edit(d_model=64.0),
        "d_model_zero": edit(d_model=0),
        "d_state_odd": edit(d_state=15),
        "ssm_heads_not_divisor": edit(num_ssm_heads=3),
        "feed_forward_unknown": edit(feed_forward_proj="gated-swiglu"),
        "feed_forward_bad_format": edit(feed_forward_proj="double-gated-gelu"),
        "model_type_gpt2": edit(model_type="gpt2"),
        "bart_with_t5_fields": edit(model_type="bart"),  # BART's own names are missing
        "missing_model_type": edit(model_type=None),
        "tie_string": edit(tie_word_embeddings="yes"),
        "eos_out_of_vocab": edit(eos_token_id=[1, 600]),
        "epsilon_zero": edit(layer_norm_epsilon=0),
        "attention_type_unknown": edit(encoder_attention_type="global"),
        "duplicate_key": '{"model_type": "locost", "d_model": 64, "d_model": 128}\n',
        "not_object": "[1, 2, 3]\n",
        "truncated": '{"model_type": "locost",\n "d_model": 6',
        "generation_num_beams_zero": '{"num_beams": 0}\n',
        "generation_early_stopping": '{"num_beams": 4, "early_stopping": "sometimes"}\n',
        "generation_eos_string": '{"eos_token_id": "1"}\n',
        "generation_bad_words": '{"bad_words_ids": [[5, 6], []]}\n',
        "generation_return_sequences": '{"num_beams": 2, "num_return_sequences": 3}\n',
    }
    shutil.rmtree(os.path.join(HERE, "config"), ignore_errors=True)
    for name, text in cases.items():
        write("config/%s.json" % name, text)


if __name__ == "__main__":
    safetensors_cases()
    index_cases()
    config_cases()
