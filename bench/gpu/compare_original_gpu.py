#!/usr/bin/python3
"""Side by side on one NVIDIA GPU (issue 13): the ORIGINAL LOCOST code against ours, base size,
random weights, batch 1.

  (a) original encoder  one process per (length, precision):  this script --child encoder
        --length L --dtype fp32|bf16 --device cuda. It builds the original's LOCOSTStack at the
        paper's base size (d_model 768, d_ff 2048, 12 layers, d_state 512, vocabulary 32100) with
        the original initialisation, moves it to the GPU and times forward passes between
        torch.cuda.synchronize() calls. Its reference path: use_fast_fft_conv=False (the exact
        FFT convolution, torch.fft = cuFFT) and the log-Vandermonde kernel generation as one
        complex GEMM per row block (the shared tools' shim/cauchy_mult.py, complex64). bf16 =
        torch.autocast(bfloat16), as a user would speed the original up. Reports tokens/s and
        torch.cuda.max_memory_allocated().
  (b) original greedy decoding  --child decode --length L: the encoder once, then greedy steps
        with past_key_values (the original's T5 decoder cache); steady ms/token = median step.
  (c) ours  build/cuda/bench/bm_cuda_encoder (JSON): tokens/s and peak device memory per length,
        float32 and LOCOST_BENCH_COMPUTE=bf16.
  (d) ours greedy decoding  build/cuda/bin/locost generate --device cuda on L random ids of
        the same demo checkpoint, --min-new-tokens = --max-new-tokens = --new-tokens, once per
        decoder weight storage of --ours-weights (--weights float32|bfloat16|int8): the tool's
        closing line gives ms/token (the mean over every step, the first included).

Then prints a markdown table with the ratios (ours / original at the same precision). The
original's code and the shared tools (refenv.py, common.py, shim/) exist only on this project's
development machines: pass --tools (the folder with refenv.py) and --ref-root (REF_ROOT, the clones
that setup.sh made). On a machine without a GPU, --device cpu runs the original's part at small
lengths, which checks this driver (the timings then mean nothing for issue 13).

    /usr/bin/python3 bench/gpu/compare_original_gpu.py --tools HARNESS --ref-root CLONES \\
        --build build/cuda --model DEMO_BASE --lengths 16384,65536,696580 --decode-lengths 4096,16384,65536 --md /tmp/gpu.md
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # the repository (this file is in bench/<folder>/)


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def original_env(tools):
    """Puts the shared tools (shim first, then the original clones) on sys.path."""
    sys.path.insert(0, tools)
    import refenv  # noqa: F401  (side effect: sys.path)


def base_config():
    from common import locost_config

    return locost_config(vocab_size=32100, d_model=768, d_state=512, d_ff=2048, num_layers=12, num_decoder_layers=12, num_heads=12,
                         d_kv=64, num_ssm_heads=1, local_radius=127, dropout_rate=0.0, use_fast_fft_conv=False, tie_word_embeddings=True)


def sync(torch, device):
    if device == "cuda":
        torch.cuda.synchronize()


def peak_bytes(torch, device):
    """Peak bytes in tensors (max_memory_allocated), as ours reports tensors_GB."""
    return torch.cuda.max_memory_allocated() if device == "cuda" else None


def peak_reserved(torch, device):
    """Peak bytes PyTorch's caching allocator held from the driver, as ours reports peak_GB."""
    return torch.cuda.max_memory_reserved() if device == "cuda" else None


def child_encoder(a):
    import copy

    import torch
    from models import LOCOSTStack

    torch.manual_seed(0)
    cfg = base_config()
    enc_cfg = copy.deepcopy(cfg)  # as LOCOSTForConditionalGeneration builds its encoder
    enc_cfg.is_decoder, enc_cfg.use_cache, enc_cfg.is_encoder_decoder = False, False, False
    enc = LOCOSTStack(enc_cfg, torch.nn.Embedding(cfg.vocab_size, cfg.d_model)).eval().to(a.device)
    ids = torch.randint(2, cfg.vocab_size, (1, a.length), generator=torch.Generator().manual_seed(1)).to(a.device)
    times = []
    with torch.no_grad(), torch.autocast(device_type=a.device, dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
        for r in range(a.warmup + a.runs):
            if a.device == "cuda" and r == a.warmup:
                torch.cuda.reset_peak_memory_stats()
            sync(torch, a.device)
            t0 = time.perf_counter()
            out = enc(input_ids=ids, return_dict=True).last_hidden_state
            sync(torch, a.device)
            if r >= a.warmup:
                times.append(time.perf_counter() - t0)
            if not torch.isfinite(out).all():
                raise SystemExit("original encoder: non-finite states")
            del out
    med = statistics.median(times)
    return {"mode": "encoder", "length": a.length, "dtype": a.dtype, "device": a.device, "runs_s": times, "median_s": med,
            "tokens_per_s": a.length / med, "peak_device_bytes": peak_bytes(torch, a.device),
            "peak_reserved_bytes": peak_reserved(torch, a.device)}


def child_decode(a):
    import torch
    from models import LOCOSTForConditionalGeneration

    torch.manual_seed(0)
    cfg = base_config()
    model = LOCOSTForConditionalGeneration(cfg).eval().to(a.device)
    ids = torch.randint(2, cfg.vocab_size, (1, a.length), generator=torch.Generator().manual_seed(1)).to(a.device)
    steps = []
    with torch.no_grad(), torch.autocast(device_type=a.device, dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
        enc = model.encoder(input_ids=ids, return_dict=True)
        seq = torch.full((1, 1), cfg.decoder_start_token_id, dtype=torch.long, device=a.device)
        past = None
        for _ in range(a.new_tokens):
            sync(torch, a.device)
            t0 = time.perf_counter()
            o = model(encoder_outputs=enc, decoder_input_ids=seq[:, -1:] if past is not None else seq, past_key_values=past,
                      use_cache=True, return_dict=True)
            nxt = o.logits[:, -1, :].argmax(-1)
            past = o.past_key_values
            seq = torch.cat([seq, nxt[:, None]], 1)
            sync(torch, a.device)
            steps.append(time.perf_counter() - t0)
    return {"mode": "decode", "length": a.length, "dtype": a.dtype, "device": a.device, "first_step_ms": steps[0] * 1e3,
            "steady_ms_per_token": statistics.median(steps[1:]) * 1e3, "peak_device_bytes": peak_bytes(torch, a.device)}


def run_child(args, extra):
    cmd = [sys.executable, os.path.abspath(__file__), "--tools", args.tools, "--device", args.device] + extra
    env = dict(os.environ, REF_ROOT=args.ref_root, LOCOST_VAND_PRECISION="float32")
    for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        env.pop(k, None)
    log("original:", " ".join(extra))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    log(f"original failed (exit {p.returncode}):", p.stderr[-2000:])
    return None


def ours(args, compute):
    exe = os.path.join(args.build, "bench", "bm_cuda_encoder")
    names = "|".join(str(L) for L in args.lengths)
    env = dict(os.environ, LOCOST_BENCH_MODEL=args.model, LOCOST_BENCH_COMPUTE=compute)
    cmd = [exe, f"--benchmark_filter=BM_cuda_encoder/({names})/", "--benchmark_format=json"]
    log("ours:", compute, " ".join(cmd))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        log("bm_cuda_encoder failed:", p.stderr[-2000:])
        return {}
    rows = {}
    text = p.stdout[p.stdout.find("{"):]  # after the line naming the GPU
    for b in (json.loads(text) if text else {}).get("benchmarks", []):
        L = int(b["name"].split("/")[1])
        rows[L] = {"tokens_per_s": b.get("tokens/s"), "peak_GB": b.get("peak_GB"), "tensors_GB": b.get("tensors_GB")}
    return rows


def ours_decode(args, L, weights):
    """Greedy decoding through the tool on `args.ours_device` with the decoder's weights stored as
    `weights`: the closing line's ms/token."""
    import random
    import re
    import tempfile

    exe = os.path.join(args.build, "bin", "locost")
    rng = random.Random(L)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump([[rng.randrange(4, 32000) for _ in range(L)]], f)
        ids = f.name
    n = str(args.new_tokens)
    cmd = [exe, "generate", "--model", args.model, "--ids", ids, "--max-new-tokens", n, "--min-new-tokens", n, "--device", args.ours_device,
           "--weights", weights]
    log("ours:", " ".join(cmd))
    env = dict(os.environ)
    for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        env.pop(k, None)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    os.unlink(ids)
    m = re.search(r"decode (\d+) steps, ([0-9.]+) ms/token", p.stderr)
    if p.returncode != 0 or not m:
        log(f"ours generate failed (exit {p.returncode}):", p.stderr[-2000:])
        return None
    return {"steps": int(m.group(1)), "ms_per_token": float(m.group(2))}


def table(enc, dec, mine, mine_dec=None, weights=("float32",)):
    def num(v, scale=1.0, fmt=",.0f"):
        return format(v / scale, fmt) if v else "—"

    # Peak GB as "in tensors / held from the driver" (caching allocators on both sides).
    out = ["| L | precision | original tokens/s | original peak GB | ours tokens/s | ours peak GB | ours / original |",
           "|---:|---|---:|---:|---:|---:|---:|"]
    for (L, dtype), r in sorted(enc.items()):
        r, o = r or {}, mine.get(dtype, {}).get(L, {})
        ot, mt = r.get("tokens_per_s"), o.get("tokens_per_s")
        ratio = f"{mt / ot:.2f}×" if ot and mt else "—"
        orig_gb = f"{num(r.get('peak_device_bytes'), 1e9, '.1f')} / {num(r.get('peak_reserved_bytes'), 1e9, '.1f')}"
        ours_gb = f"{num(o.get('tensors_GB'), 1.0, '.1f')} / {num(o.get('peak_GB'), 1.0, '.1f')}"
        out.append(f"| {L} | {dtype} | {num(ot)} | {orig_gb} | {num(mt)} | {ours_gb} | {ratio} |")
    mine_dec = mine_dec or {}
    if dec or mine_dec:
        ours_cols = " | ".join(f"ours greedy ms/token, {w} weights (mean, first step included)" for w in weights)
        out += ["", f"| L | original greedy ms/token (steady) | first step ms | {ours_cols} |",
                "|---:|---:|---:|" + "---:|" * len(weights)]
        for L in sorted(set(dec) | set(mine_dec)):
            r, o = dec.get(L) or {}, mine_dec.get(L) or {}
            cells = " | ".join(num((o.get(w) or {}).get("ms_per_token"), 1.0, ".2f") for w in weights)
            out.append(f"| {L} | {num(r.get('steady_ms_per_token'), 1.0, '.2f')} | {num(r.get('first_step_ms'), 1.0, '.1f')} | {cells} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", choices=["encoder", "decode"])
    ap.add_argument("--tools", help="the original code's harness folder (refenv.py, common.py, shim/); not in the repository")
    ap.add_argument("--ref-root", default=os.environ.get("REF_ROOT", "/tmp/ref"))
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "cuda"))
    ap.add_argument("--model", help="base demo checkpoint (UNTRAINED random weights) for ours")
    ap.add_argument("--lengths", default="16384,65536,696580")
    ap.add_argument("--decode-lengths", default="4096,16384,65536")
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--length", type=int, default=4096)
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--skip-ours", action="store_true")
    ap.add_argument("--ours-device", default="cuda", choices=["cuda", "cpu"], help="where our greedy decoding runs (cpu: checks the driver)")
    ap.add_argument("--ours-weights", default="float32,bfloat16,int8", help="decoder weight storages for our greedy decoding (--weights)")
    ap.add_argument("--md")
    ap.add_argument("--json")
    args = ap.parse_args()
    if not args.tools or not os.path.isfile(os.path.join(args.tools, "refenv.py")):
        raise SystemExit(f"--tools: a folder holding refenv.py (the original code's harness) is needed, got {args.tools!r}")
    args.tools = os.path.abspath(args.tools)
    if args.child:
        original_env(args.tools)
        import torch

        if args.device == "cuda" and not torch.cuda.is_available():
            raise SystemExit("--device cuda: torch sees no GPU")
        r = child_encoder(args) if args.child == "encoder" else child_decode(args)
        print("RESULT " + json.dumps(r), flush=True)
        return
    args.lengths = [int(x) for x in args.lengths.split(",") if x]
    dtypes = [x for x in args.dtypes.split(",") if x]
    weights = [x for x in args.ours_weights.split(",") if x]
    enc, dec, mine, mine_dec = {}, {}, {}, {}
    for L in args.lengths:
        for dt in dtypes:
            enc[(L, dt)] = run_child(args, ["--child", "encoder", "--length", str(L), "--dtype", dt, "--runs", str(args.runs),
                                            "--warmup", str(args.warmup)])
    for L in [int(x) for x in args.decode_lengths.split(",") if x]:
        dec[L] = run_child(args, ["--child", "decode", "--length", str(L), "--new-tokens", str(args.new_tokens)])
    if not args.skip_ours:
        if not args.model:
            raise SystemExit("--model: the base demo checkpoint (locost demo-checkpoint --config base --out DIR)")
        for dt in dtypes if args.lengths else []:  # no encoder lengths: decoding only
            mine[dt] = ours(args, dt)
        for L in [int(x) for x in args.decode_lengths.split(",") if x]:
            mine_dec[L] = {w: ours_decode(args, L, w) for w in weights}
    md = table(enc, dec, mine, mine_dec, weights)
    print(md)
    if args.md:
        with open(args.md, "w") as f:
            f.write(md + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"original_encoder": {f"{L}/{d}": r for (L, d), r in enc.items()}, "original_decode": dec, "ours": mine,
                       "ours_decode": mine_dec}, f, indent=1)


if __name__ == "__main__":
    main()
