#!/usr/bin/python3
"""Copies of a safetensors checkpoint in the other formats locost loads, for bench/load/bm_load:
   DIR-bin/pytorch_model.bin (torch.save, tied embeddings sharing one storage),
   DIR-f16/model.safetensors, DIR-bf16/model.safetensors.
Usage: bench/load/make_checkpoint_variants.py DIR      (Debian python3-torch, python3-numpy)"""
import json, os, shutil, struct, sys

import numpy as np
import torch

src = sys.argv[1].rstrip("/")
raw = open(os.path.join(src, "model.safetensors"), "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
base = 8 + n
tensors = {}
for name, e in header.items():
    if name == "__metadata__":
        continue
    assert e["dtype"] == "F32", name
    b, end = e["data_offsets"]
    tensors[name] = torch.from_numpy(np.frombuffer(raw, dtype="<f4", count=(end - b) // 4, offset=base + b).reshape(e["shape"]).copy())


def copy_side_files(dst):
    os.makedirs(dst, exist_ok=True)
    for f in ("config.json", "spiece.model", "README.md"):
        if os.path.exists(os.path.join(src, f)):
            shutil.copy(os.path.join(src, f), dst)


def write_st(path, items):
    hdr, off, blobs = {}, 0, []
    for name, (dt, shape, data) in items:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
        blobs.append(data)
    h = json.dumps(hdr).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


copy_side_files(src + "-bin")
sd = dict(tensors)
for alias in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight"):
    sd[alias] = sd["shared.weight"]  # one storage, several names, as save_pretrained writes it
torch.save(sd, os.path.join(src + "-bin", "pytorch_model.bin"))

for tag, dt, tdt in (("f16", "F16", torch.float16), ("bf16", "BF16", torch.bfloat16)):
    copy_side_files(src + "-" + tag)
    items = [(k, (dt, list(v.shape), v.to(tdt).view(torch.int16).numpy().tobytes())) for k, v in tensors.items()]
    write_st(os.path.join(src + "-" + tag, "model.safetensors"), items)
print("wrote", src + "-bin", src + "-f16", src + "-bf16")
