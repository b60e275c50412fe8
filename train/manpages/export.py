"""Write a model as a Hugging Face checkpoint directory that locost (and transformers) load.

    DIR/config.json              the model's config (model.py's config_t5 / config_locost)
    DIR/model.safetensors        the weights, F32 (or the large matrices BF16), written here byte by
                                 byte (format below)
    DIR/generation_config.json   decoder start 0, eos 1, pad 0, max_new_tokens, num_beams
    DIR/spiece.model             the SentencePiece model the ids come from (copied)
    DIR/README.md                what the checkpoint is (a stub unless a text is given)

The directory is written as DIR.tmp and renamed into place at the end, so DIR is either the old
checkpoint or the complete new one, never a half-written one.

safetensors: an 8-byte little-endian unsigned header length n, then n bytes of JSON
{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}} (offsets
relative to the end of the header; padded with spaces to a multiple of 8 so the data is aligned),
then the tensors' raw little-endian bytes, one after the other in the header's order.

    export.py --checkpoint RUN/checkpoint.pt --out DIR [--dtype bf16]   # a training run's latest save
"""
import argparse
import json
import os
import shutil
import struct

import torch

DTYPES = {"float32": ("F32", torch.float32), "F32": ("F32", torch.float32),
          "bfloat16": ("BF16", torch.bfloat16), "bf16": ("BF16", torch.bfloat16), "BF16": ("BF16", torch.bfloat16)}


def tensor_bytes(t, dtype):
    """Little-endian bytes of t converted to dtype (torch.float32 or torch.bfloat16)."""
    t = t.detach().to("cpu").contiguous()
    if dtype == torch.bfloat16:
        # numpy has no bfloat16: the 16-bit pattern travels as int16 (round-to-nearest-even in .to())
        return t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
    return t.to(torch.float32).numpy().astype("<f4").tobytes()


def stored_dtype(name, t, dtype):
    """The dtype a tensor is written in. "float32": all float32. "bfloat16": the weight matrices
    (embeddings, projections, the LM head: 2-D, 4096 values or more) in bfloat16, which is nearly all
    the bytes; the small tensors whose precision the model is sensitive to stay float32: the norms,
    biases, D, the relative position biases and the S4D kernel's parameters (bfloat16 has 8 bits of
    mantissa: an A_imag of pi*31 would move by up to 0.25, a log_dt by up to 1/64 of itself)."""
    if DTYPES[dtype][1] == torch.float32:
        return torch.float32
    if t.ndim == 2 and t.numel() >= 4096 and ".kernel." not in name:
        return torch.bfloat16
    return torch.float32


def write_safetensors(path, tensors, dtype="float32", metadata=None):
    """tensors: {name: torch.Tensor}, written as stored_dtype() says for `dtype` (float32 or bfloat16)."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        torch_dtype = stored_dtype(name, tensors[name], dtype)
        code = "BF16" if torch_dtype == torch.bfloat16 else "F32"
        data = tensor_bytes(tensors[name], torch_dtype)
        header[name] = {"dtype": code, "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt", **{str(k): str(v) for k, v in (metadata or {}).items()}}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """{name: torch.Tensor (float32)} of a file write_safetensors wrote (F32 or BF16): for tests."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        b, e = h["data_offsets"]
        raw = bytearray(data[b:e])
        if h["dtype"] == "F32":
            t = torch.frombuffer(raw, dtype=torch.float32)
        elif h["dtype"] == "BF16":
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16).float()
        else:
            raise ValueError("%s: dtype %s" % (name, h["dtype"]))
        out[name] = t.reshape(h["shape"]).clone()
    return out


def load_checkpoint(directory):
    """A model.Seq2Seq with the weights of a checkpoint directory export() wrote (in float32)."""
    from model import Seq2Seq
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    config.pop("torch_dtype", None)
    m = Seq2Seq(config)
    m.load_state_dict(read_safetensors(os.path.join(directory, "model.safetensors")))
    return m.eval()


def generation_config(max_new_tokens=32, num_beams=1, **extra):
    g = {"decoder_start_token_id": 0, "eos_token_id": 1, "pad_token_id": 0,
         "max_new_tokens": int(max_new_tokens), "num_beams": int(num_beams)}
    g.update(extra)
    return g


README_STUB = """# {name}

A {kind} checkpoint written by locost's `train/manpages/export.py` ({params:,} parameters, weights
in {dtype}). Model card to be filled in: data, training recipe, command, scores, licence.

Files: config.json, model.safetensors, generation_config.json, spiece.model.
"""


def export(model, out_dir, spm_model, dtype="float32", max_new_tokens=32, num_beams=1, readme=None, metadata=None,
           generation_extra=None):
    """Write model (model.Seq2Seq) as a checkpoint directory out_dir. Returns out_dir."""
    out_dir = os.path.abspath(out_dir.rstrip("/"))
    tmp, old = out_dir + ".tmp", out_dir + ".old"
    for d in (tmp, old):
        if os.path.exists(d):
            shutil.rmtree(d)
    os.makedirs(tmp)
    config = dict(model.config)
    if dtype in ("bfloat16", "bf16", "BF16"):
        config["torch_dtype"] = "bfloat16"
    else:
        config["torch_dtype"] = "float32"
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(tmp, "model.safetensors"), model.export_state(), dtype, metadata)
    with open(os.path.join(tmp, "generation_config.json"), "w") as f:
        json.dump(generation_config(max_new_tokens, num_beams, **(generation_extra or {})), f, indent=2)
        f.write("\n")
    shutil.copyfile(spm_model, os.path.join(tmp, "spiece.model"))
    if readme is None:
        readme = README_STUB.format(name=os.path.basename(out_dir), kind=config["model_type"],
                                    params=sum(p.numel() for p in model.parameters()),
                                    dtype="float32" if DTYPES[dtype][0] == "F32" else
                                    "bfloat16 (the weight matrices; norms, biases and the S4D kernel's parameters float32)")
    with open(os.path.join(tmp, "README.md"), "w") as f:
        f.write(readme)
    if os.path.exists(out_dir):
        os.rename(out_dir, old)
    os.rename(tmp, out_dir)
    if os.path.exists(old):
        shutil.rmtree(old)
    return out_dir


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True, help="a training save (train.py's RUN/checkpoint.pt)")
    ap.add_argument("--out", required=True, help="checkpoint directory to write")
    ap.add_argument("--spm", help="SentencePiece model (default: the one the run was trained with)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--num-beams", type=int, default=1)
    a = ap.parse_args()
    from model import Seq2Seq
    state = torch.load(a.checkpoint, map_location="cpu")
    m = Seq2Seq(state["config"])
    m.load_state_dict(state["model"])
    spm = a.spm or state["args"]["spm"]
    print(export(m, a.out, spm, a.dtype, a.max_new_tokens, a.num_beams))


if __name__ == "__main__":
    main()
