#!/usr/bin/python3
"""Side by side: our encoder against ONNX Runtime (the runtime users pick for these models on a CPU)
on the same weights and the same ids, fp32, encode only.

ONNX Runtime is a peer for this benchmark only, never a dependency of locost. Its side:
  export   /usr/bin/python3 compare_onnxruntime.py --child export --checkpoint DIR --length L --out M.onnx
           Debian's python3-torch (1.13) builds an encoder module written here after transformers'
           T5Attention (dense, model_type t5) and LongT5LocalAttention (encoder_attention_type
           "local"): shared embedding, per block an RMS-normed self-attention with the relative
           position bias of block 0 (bidirectional buckets), an RMS-normed gated-GELU (tanh)
           feed-forward, a final RMS norm; the local attention splits the sequence into blocks of
           local_radius + 1, lets each block attend to itself and its two neighbours (3 blocks of
           keys) with the locality mask |i - j| <= local_radius, as LongT5LocalAttention does.
           It reads the tensors of our demo checkpoint's model.safetensors (nothing else), checks
           its output against our tool's on the same ids, and exports it with torch.onnx.export,
           opset 17, one file per length (static shapes: ONNX Runtime's best case; the attention
           mask is all ones and folded into constants, the local mask kept apart from the bias
           so that no (blocks, heads, block, 3·block) constant is made).
  run      node compare_onnxruntime.mjs --ort ORT_DIR --model M.onnx --ids IDS.json --threads T
           onnxruntime-node 1.30 (npm, installed with --ignore-scripts into WORK/ort-node; its CPU
           library picks its kernels by the CPU's features): every graph optimization, T intra-op
           threads, W warm-up runs, then R timed runs of InferenceSession.run; median.
Our side:
  run      locost encode --model DIR --ids IDS.json --out OUT --threads T, R processes; the tool's
           own closing line gives the encode's seconds (the weights' load apart): a first run,
           set against ONNX Runtime's first run after creating its session.
  warm     bench/encoder/bm_encoder's BM_encoder_warm on the same checkpoint (LOCOST_BENCH_MODEL,
           LOCOST_BENCH_LENGTHS=L, LOCOST_BENCH_THREADS=T): one untimed call, then the mean of 3,
           set against ONNX Runtime's median after its warm-up. Each runtime's first call pays
           one-time costs (kernels generated, memory first touched); warm against warm is the
           steady state of a process that encodes many inputs.
Both sides: OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE removed (as on a user's machine), OMP_NUM_THREADS=T;
peak RSS from wait4 for the whole process. Outputs compared: max |ORT - locost| and the largest
|value|, per case (the ids are seeded random ids; the weights UNTRAINED random demo weights).

Usage:
  bench/peers/compare_onnxruntime.py [--build build/dev] [--work /tmp/locost-ort]
      [--cases longt5-local:4096,longt5-local:16384,t5:512,t5:1024,t5:2048]
      [--threads 2] [--runs 3] [--warmup 1] [--json OUT.json]
Prints a Markdown table (bench/RESULTS.md, "Against ONNX Runtime") and, with --json, every number.
Missing pieces are installed first: python3-torch and python3-onnx with apt-get (as root),
onnxruntime-node into WORK/ort-node with npm.
"""
import argparse
import inspect
import json
import math
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # the repository (this file is in bench/<folder>/)
ORT_VERSION = "1.30.0"


# ---------------------------------------------------------------------------------------------
# The exporter (a child process: torch is imported only here)
# ---------------------------------------------------------------------------------------------

def read_safetensors(path, names):
    """The named float32 tensors of a safetensors file, as torch tensors."""
    import numpy as np
    import torch
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name in names:
            rec = header[name]
            if rec["dtype"] != "F32":
                raise SystemExit(f"{path}: tensor '{name}' is {rec['dtype']}, the exporter reads F32 only")
            b, e = rec["data_offsets"]
            f.seek(base + b)
            a = np.frombuffer(f.read(e - b), dtype="<f4").reshape(rec["shape"])
            out[name] = torch.from_numpy(a.copy())
        return out


def relative_buckets(rel, num_buckets, max_distance):
    """transformers' bidirectional _relative_position_bucket, on a LongTensor of j - i."""
    import torch
    half = num_buckets // 2
    bucket = (rel > 0).long() * half
    n = rel.abs()
    max_exact = half // 2
    small = n < max_exact
    large = max_exact + (torch.log(n.float().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
                         * (half - max_exact)).long()
    large = torch.minimum(large, torch.full_like(large, half - 1))
    return bucket + torch.where(small, n, large)


def build_encoder(checkpoint, length):
    import torch
    cfg = json.load(open(os.path.join(checkpoint, "config.json")))
    local = cfg.get("model_type") == "longt5"
    if local and cfg.get("encoder_attention_type") != "local":
        raise SystemExit(f"{checkpoint}: LongT5 with encoder_attention_type "
                         f"'{cfg.get('encoder_attention_type')}'; this comparison exports 'local' only")
    if cfg.get("feed_forward_proj") != "gated-gelu":
        raise SystemExit(f"{checkpoint}: feed_forward_proj '{cfg.get('feed_forward_proj')}', expected gated-gelu")
    attn = "LocalSelfAttention" if local else "SelfAttention"
    layers = cfg["num_layers"]
    names = ["shared.weight", "encoder.final_layer_norm.weight",
             f"encoder.block.0.layer.0.{attn}.relative_attention_bias.weight"]
    for i in range(layers):
        p = f"encoder.block.{i}.layer."
        names += [p + f"0.{attn}.{w}.weight" for w in "qkvo"] + [p + "0.layer_norm.weight"]
        names += [p + f"1.DenseReluDense.{w}.weight" for w in ("wi_0", "wi_1", "wo")] + [p + "1.layer_norm.weight"]
    t = read_safetensors(os.path.join(checkpoint, "model.safetensors"), names)

    heads, d_kv, eps = cfg["num_heads"], cfg["d_kv"], cfg["layer_norm_epsilon"]
    nb, md = cfg["relative_attention_num_buckets"], cfg["relative_attention_max_distance"]
    block = cfg["local_radius"] + 1 if local else 0

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            P = lambda n: torch.nn.Parameter(t[n], requires_grad=False)
            self.shared = P("shared.weight")
            self.final_norm = P("encoder.final_layer_norm.weight")
            self.rel_bias = P(f"encoder.block.0.layer.0.{attn}.relative_attention_bias.weight")
            self.w = torch.nn.ParameterList()
            for i in range(layers):
                p = f"encoder.block.{i}.layer."
                for n in [p + f"0.{attn}.{w}.weight" for w in "qkvo"] + [p + "0.layer_norm.weight"] + \
                         [p + f"1.DenseReluDense.{w}.weight" for w in ("wi_0", "wi_1", "wo")] + [p + "1.layer_norm.weight"]:
                    self.w.append(P(n))
            if local:
                # Query i of a block against the 3 blocks around it: key position j - block.
                mem = torch.arange(3 * block)
                rel = mem[None, :] - mem[block:2 * block][:, None]
                self.register_buffer("bucket", relative_buckets(rel, nb, md))
                # Keys outside the sequence (the blocks before the first and after the last) and
                # keys farther than the radius are masked with -1e10, as transformers does.
                n_blocks = (length + block - 1) // block
                valid = torch.zeros(n_blocks + 2, block, dtype=torch.bool)
                valid.view(-1)[block:block + length] = True
                keys = torch.cat([valid[:-2], valid[1:-1], valid[2:]], dim=1)  # (blocks, 3·block)
                near = rel.abs() < block
                allowed = keys[:, None, :] & near[None, :, :]
                self.register_buffer("mask", torch.where(allowed, 0.0, -1e10).unsqueeze(1))  # (blocks, 1, block, 3·block)
            else:
                pos = torch.arange(length)
                self.register_buffer("bucket", relative_buckets(pos[None, :] - pos[:, None], nb, md))

        def norm(self, x, w):
            return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

        def attention(self, x, wq, wk, wv, wo, bias):
            B, L, _ = x.shape
            q = (x @ wq.t()).view(B, L, heads, d_kv)
            k = (x @ wk.t()).view(B, L, heads, d_kv)
            v = (x @ wv.t()).view(B, L, heads, d_kv)
            if not local:
                s = torch.einsum("bqhd,bkhd->bhqk", q, k) + bias
                ctx = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, dim=-1), v)
            else:
                n = (L + block - 1) // block
                pad = n * block - L

                def blocks(y):
                    if pad:
                        y = torch.nn.functional.pad(y, (0, 0, 0, 0, 0, pad))
                    return y.view(B, n, block, heads, d_kv)

                def three(y):  # (B, n, block, h, d) -> (B, n, 3·block, h, d)
                    y = torch.nn.functional.pad(y, (0, 0, 0, 0, 0, 0, 1, 1))
                    return torch.cat([y[:, :-2], y[:, 1:-1], y[:, 2:]], dim=2)

                qb, kb, vb = blocks(q), three(blocks(k)), three(blocks(v))
                s = torch.einsum("bnqhd,bnkhd->bnhqk", qb, kb) + bias
                s = s + self.mask
                ctx = torch.einsum("bnhqk,bnkhd->bnqhd", torch.softmax(s, dim=-1), vb)
                ctx = ctx.reshape(B, n * block, heads, d_kv)[:, :L]
            return ctx.reshape(B, L, heads * d_kv) @ wo.t()

        def forward(self, input_ids):
            x = torch.nn.functional.embedding(input_ids, self.shared)
            bias = self.rel_bias[self.bucket].permute(2, 0, 1).unsqueeze(0)  # (1, heads, q, k)
            c = math.sqrt(2.0 / math.pi)
            for i in range(layers):
                wq, wk, wv, wo, n0, wi0, wi1, wff, n1 = self.w[9 * i:9 * i + 9]
                x = x + self.attention(self.norm(x, n0), wq, wk, wv, wo, bias)
                h = self.norm(x, n1)
                a = h @ wi0.t()
                g = 0.5 * a * (1.0 + torch.tanh(c * (a + 0.044715 * torch.pow(a, 3.0))))
                x = x + (g * (h @ wi1.t())) @ wff.t()
            return self.norm(x, self.final_norm)

    return Encoder().eval()


def child_export(a):
    import numpy as np
    import torch
    torch.set_num_threads(a.threads)
    ids = json.load(open(a.ids))
    model = build_encoder(a.checkpoint, len(ids))
    x = torch.tensor([ids], dtype=torch.long)
    with torch.no_grad():
        y = model(x).numpy()
    if a.reference:
        ref = read_locost_states(a.reference)
        d = float(np.abs(ref - y).max())
        print(f"export: the module against locost's states: max |diff| {d:.3g}, max |value| {float(np.abs(ref).max()):.3g}",
              file=sys.stderr)
        if not d <= a.tolerance * max(1.0, float(np.abs(ref).max())):
            raise SystemExit(f"export: the PyTorch module differs from locost by {d:.3g} (> {a.tolerance:g} relative): not exporting")
    with torch.no_grad():
        extra = {}
        if "dynamo" in inspect.signature(torch.onnx.export).parameters:
            extra["dynamo"] = False  # the TorchScript exporter on every torch version (2.9 made dynamo the default)
        torch.onnx.export(model, (x,), a.out, input_names=["input_ids"], output_names=["last_hidden_state"],
                          opset_version=17, do_constant_folding=True, **extra)
    try:  # Debian's python3-onnx; the check is skipped where only torch is installed
        import onnx
        onnx.checker.check_model(a.out)
    except ImportError:
        pass
    print("RESULT " + json.dumps({"out": a.out, "bytes": os.path.getsize(a.out)}))


def child_ort_python(a):
    """ONNX Runtime's Python package as the runner (a machine with no node): the same session
    options and the same RESULT line as compare_onnxruntime.mjs."""
    import numpy as np
    import onnxruntime as ort
    ids = json.load(open(a.ids))
    o = ort.SessionOptions()
    o.intra_op_num_threads = a.threads
    o.inter_op_num_threads = 1
    o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    t0 = time.perf_counter()
    sess = ort.InferenceSession(a.model, o, providers=["CPUExecutionProvider"])
    load = time.perf_counter() - t0
    x = {"input_ids": np.array([ids], dtype=np.int64)}
    warm, runs, last = [], [], None
    for _ in range(a.warmup):
        t = time.perf_counter()
        last = sess.run(None, x)[0]
        warm.append(time.perf_counter() - t)
    for _ in range(a.runs):
        t = time.perf_counter()
        last = sess.run(None, x)[0]
        runs.append(time.perf_counter() - t)
    if a.out:
        np.ascontiguousarray(last, dtype="<f4").tofile(a.out)
    m = median(runs)
    import resource
    print("RESULT " + json.dumps({"runtime": f"onnxruntime (Python) {ort.__version__}", "length": len(ids), "threads": a.threads,
                                  "load_s": load, "warmup_s": warm, "runs_s": runs, "median_s": m, "tokens_per_s": len(ids) / m,
                                  "output_shape": list(last.shape),
                                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def read_locost_states(path):
    import numpy as np
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
        rec = h["last_hidden_state"]
        b, e = rec["data_offsets"]
        f.seek(8 + n + b)
        return np.frombuffer(f.read(e - b), dtype="<f4").reshape(rec["shape"])


# ---------------------------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------------------------

def clean_env(threads):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    env.update(OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    return env


def run_measured(cmd, env, what):
    """Runs cmd and returns (stdout, stderr, seconds, peak RSS MiB). The output goes to temporary
    files so that the child can be reaped with wait4, which gives its own peak RSS."""
    import tempfile
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        secs = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read().decode(errors="replace"), fe.read().decode(errors="replace")
    if p.returncode != 0:
        raise SystemExit(f"{what} failed ({p.returncode}):\n{err[-3000:]}")
    return out, err, secs, usage.ru_maxrss / 1024.0


def result_line(text, what):
    for line in text.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise SystemExit(f"{what}: no RESULT line in its output:\n{text[-2000:]}")


def ensure_tools(work, install, runner):
    missing = []
    for mod, pkg in (("torch", "python3-torch"), ("onnx", "python3-onnx"), ("numpy", "python3-numpy")):
        if subprocess.run([sys.executable, "-c", f"import {mod}"], capture_output=True).returncode != 0:
            missing.append(pkg)
    if missing and install:
        if os.geteuid() != 0:
            raise SystemExit(f"missing Debian packages: {' '.join(missing)} (apt-get install {' '.join(missing)})")
        print(f"installing {' '.join(missing)} (apt-get)", file=sys.stderr)
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    elif [m for m in missing if m != "python3-onnx"]:  # without onnx the exported file is not checked
        raise SystemExit(f"{sys.executable} lacks {' '.join(missing)}")
    if runner != "node":
        return None
    if shutil.which("node") is None:
        raise SystemExit("node is needed for ONNX Runtime's side (apt-get install nodejs npm)")
    ort_dir = os.path.join(work, "ort-node")
    if not os.path.exists(os.path.join(ort_dir, "node_modules", "onnxruntime-node", "package.json")):
        if not install:
            raise SystemExit(f"{ort_dir}: no onnxruntime-node (npm install --ignore-scripts onnxruntime-node@{ORT_VERSION} there)")
        os.makedirs(ort_dir, exist_ok=True)
        print(f"installing onnxruntime-node {ORT_VERSION} into {ort_dir} (npm, --ignore-scripts)", file=sys.stderr)
        with open(os.path.join(ort_dir, "package.json"), "w") as f:
            f.write('{"name": "locost-bench-ort", "private": true}\n')
        subprocess.run(["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund", f"onnxruntime-node@{ORT_VERSION}"],
                       cwd=ort_dir, check=True, stdout=subprocess.DEVNULL)
    return ort_dir


def ensure_checkpoint(tool, work, family):
    d = os.path.join(work, family + "-base")
    if not os.path.exists(os.path.join(d, "model.safetensors")):
        cmd = [tool, "demo-checkpoint", "--config", "base", "--out", d]
        cmd += ["--family", "longt5", "--encoder-attention-type", "local"] if family == "longt5-local" else ["--family", family]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return d


def ensure_ids(work, length, vocab):
    path = os.path.join(work, f"ids-{length}.json")
    if not os.path.exists(path):
        rng = random.Random(length)
        with open(path, "w") as f:
            json.dump([rng.randrange(2, vocab) for _ in range(length - 1)] + [1], f)
    return path


ENCODE_LINE = re.compile(r"encoded (\d+) x (\d+) tokens in ([\d.]+) s: (\d+) tokens/s, peak memory ([\d.]+) GB"
                         r"(?:; weights loaded in ([\d.]+) s)?(?:; float32 GEMM (.*))?")


def median(xs):
    s = sorted(xs)
    return s[len(s) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child", choices=["export", "ort-python"])
    ap.add_argument("--model")
    ap.add_argument("--ort-runner", choices=["node", "python", "none"], default="node",
                    help="ONNX Runtime through onnxruntime-node (default), its Python package, or not at all")
    ap.add_argument("--checkpoint")
    ap.add_argument("--ids")
    ap.add_argument("--out")
    ap.add_argument("--reference", help="(export) locost's states for the same ids, checked before exporting")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "dev"))
    ap.add_argument("--work", default="/tmp/locost-ort")
    ap.add_argument("--cases", default="longt5-local:4096,longt5-local:16384,t5:512,t5:1024,t5:2048")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--export-threads", type=int, help="threads of the export (default: --threads); not timed")
    ap.add_argument("--json", help="every number, written again after each case")
    ap.add_argument("--no-install", action="store_true", help="install nothing (a machine without the registries)")
    ap.add_argument("--table", metavar="JSON", help="print the table of a --json file and exit")
    a = ap.parse_args()
    if a.child == "export":
        return child_export(a)
    if a.child == "ort-python":
        return child_ort_python(a)
    if a.table:
        saved = json.load(open(a.table))
        return print_table(saved["rows"], saved["threads"], saved["runs"], saved["warmup"])

    import numpy as np
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    tool = os.path.join(os.path.abspath(a.build), "bin", "locost")
    if not os.access(tool, os.X_OK):
        raise SystemExit(f"{tool}: not found (build the tool first: cmake --build {a.build} --target locost_cli)")
    ort_dir = ensure_tools(work, not a.no_install, a.ort_runner)
    env = clean_env(a.threads)
    rows = []
    for case in a.cases.split(","):
        family, length = case.split(":")
        length = int(length)
        ck = ensure_checkpoint(tool, work, family)
        vocab = json.load(open(os.path.join(ck, "config.json")))["vocab_size"]
        ids = ensure_ids(work, length, vocab)
        states = os.path.join(work, f"{family}-{length}.locost.safetensors")

        # Ours first (its states are the export's check), R processes.
        ours = []
        for r in range(a.runs):
            _, err, wall, rss = run_measured([tool, "encode", "--model", ck, "--ids", ids, "--out", states,
                                              "--threads", str(a.threads)], env, f"locost encode {case}")
            m = ENCODE_LINE.search(err)
            if not m:
                raise SystemExit(f"locost encode {case}: no closing line in:\n{err[-2000:]}")
            ours.append({"encode_s": float(m.group(3)), "load_s": float(m.group(6) or "nan"), "wall_s": wall,
                         "peak_rss_mib": rss, "gemm": m.group(7)})
            print(f"{case}: locost run {r + 1}: encode {ours[-1]['encode_s']:.2f} s, load {ours[-1]['load_s']:.2f} s, "
                  f"process {wall:.2f} s, {rss:.0f} MiB", file=sys.stderr)

        # Ours warm: bench/encoder/bm_encoder's BM_encoder_warm (the same checkpoint, one untimed call at the
        # length first, then the mean of 3; its ids are its own seeded random ids).
        bm = os.path.join(os.path.abspath(a.build), "bench", "bm_encoder")
        warm = None
        if os.access(bm, os.X_OK):
            out, _, _, _ = run_measured([bm, "--benchmark_filter=BM_encoder_warm", "--benchmark_format=json"],
                                        dict(env, LOCOST_BENCH_MODEL=ck, LOCOST_BENCH_LENGTHS=str(length),
                                             LOCOST_BENCH_THREADS=str(a.threads)), f"bm_encoder {case}")
            warm = [b["tokens/s"] for b in json.loads(out)["benchmarks"] if b["name"].startswith("BM_encoder_warm/")][0]
            print(f"{case}: locost warm (bm_encoder) {warm:.0f} tokens/s", file=sys.stderr)
        else:
            print(f"{case}: {bm} not built: no warm figure for locost", file=sys.stderr)

        enc = median([o["encode_s"] for o in ours])
        row = {"case": case, "family": family, "length": length, "locost_warm_tokens_per_s": warm,
               "locost_tokens_per_s": length / enc, "locost_runs": ours,
               "locost_peak_rss_mib": max(o["peak_rss_mib"] for o in ours), "gemm": ours[0]["gemm"],
               "ort_runner": a.ort_runner}
        onnx_path = os.path.join(work, f"{family}-{length}.onnx")
        if a.ort_runner != "none" and not os.path.exists(onnx_path):
            out, err, _, _ = run_measured([sys.executable, os.path.abspath(__file__), "--child", "export", "--checkpoint", ck,
                                           "--ids", ids, "--out", onnx_path + ".part", "--reference", states,
                                           "--tolerance", str(a.tolerance), "--threads", str(a.export_threads or a.threads)],
                                          env, f"export {case}")
            sys.stderr.write(err[-500:])
            os.replace(onnx_path + ".part", onnx_path)
        if a.ort_runner != "none":
            ort_out = os.path.join(work, f"{family}-{length}.ort.f32")
            if a.ort_runner == "node":
                cmd = ["node", os.path.join(HERE, "compare_onnxruntime.mjs"), "--ort", ort_dir]
            else:
                cmd = [sys.executable, os.path.abspath(__file__), "--child", "ort-python"]
            out, err, ort_wall, ort_rss = run_measured(
                cmd + ["--model", onnx_path, "--ids", ids, "--threads", str(a.threads), "--runs", str(a.runs),
                       "--warmup", str(a.warmup), "--out", ort_out], env, f"onnxruntime {case}")
            ort = result_line(out, f"onnxruntime {case}")
            print(f"{case}: onnxruntime runs {', '.join(f'{s:.2f}' for s in ort['runs_s'])} s, load {ort['load_s']:.2f} s, "
                  f"{ort_rss:.0f} MiB", file=sys.stderr)
            ref = read_locost_states(states).reshape(-1)
            got = np.fromfile(ort_out, dtype="<f4")
            if got.size != ref.size:
                raise SystemExit(f"{case}: ONNX Runtime's output has {got.size} values, locost's {ref.size}")
            row.update({"ort_runtime": ort["runtime"], "ort_tokens_per_s": length / ort["median_s"], "ort_runs_s": ort["runs_s"],
                        "ort_load_s": ort["load_s"],
                        "ort_first_tokens_per_s": length / ort["warmup_s"][0] if ort["warmup_s"] else None,
                        "ort_peak_rss_mib": ort_rss, "max_abs_diff": float(np.abs(got - ref).max()),
                        "max_abs_value": float(np.abs(ref).max())})
        rows.append(row)
        if a.json:
            with open(a.json + ".part", "w") as f:
                json.dump({"threads": a.threads, "runs": a.runs, "warmup": a.warmup, "machine": machine(), "rows": rows}, f, indent=1)
            os.replace(a.json + ".part", a.json)
    print_table(rows, a.threads, a.runs, a.warmup)


def machine():
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count()}


def print_table(rows, threads, runs, warmup):
    """Warm against warm (each runtime's steady state, the comparison issue 31 asks for), then a
    first run against a first run (ONNX Runtime's first InferenceSession.run after creating the
    session; our tool's one encode after loading), then parity, load and memory."""
    def f(x, fmt="{:.0f}"):
        return "—" if x is None else fmt.format(x)

    def ratio(a, b):
        return "—" if a is None or b is None else f"{a / b:.2f}×"

    print("| model, length | ORT warm | locost warm | warm: locost / ORT | ORT first run | locost tool | "
          "first: locost / ORT | max \\|ORT − locost\\| (max \\|value\\|) | load s ORT / locost | peak RSS MiB ORT / locost |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    names = {"t5": "T5 base (dense)", "longt5-local": "LongT5-local base"}
    for r in rows:
        warm = r.get("locost_warm_tokens_per_s")
        first = r.get("ort_first_tokens_per_s")
        if "ort_tokens_per_s" not in r:
            print(f"| {names.get(r['family'], r['family'])}, {r['length']} | — | {f(warm)} | — | — | {f(r['locost_tokens_per_s'])} "
                  f"| — | — | — / {median([o['load_s'] for o in r['locost_runs']]):.2f} | — / {r['locost_peak_rss_mib']:.0f} |")
            continue
        print(f"| {names.get(r['family'], r['family'])}, {r['length']} | {f(r['ort_tokens_per_s'])} | {f(warm)} "
              f"| {ratio(warm, r['ort_tokens_per_s'])} | {f(first)} | {f(r['locost_tokens_per_s'])} "
              f"| {ratio(r['locost_tokens_per_s'], first)} | {r['max_abs_diff']:.2g} ({r['max_abs_value']:.2g}) "
              f"| {r['ort_load_s']:.2f} / {median([o['load_s'] for o in r['locost_runs']]):.2f} "
              f"| {r['ort_peak_rss_mib']:.0f} / {r['locost_peak_rss_mib']:.0f} |")
    if rows and rows[0]["gemm"]:
        print(f"\ntokens/s, {threads} threads. ORT warm: median of {runs} runs after {warmup} warm-up run(s); locost warm: "
              f"bm_encoder's BM_encoder_warm (mean of 3 after one call); ORT first run: its first run after creating the session; "
              f"locost tool: `locost encode`'s own figure (median of {runs} processes). locost's float32 GEMM: {rows[0]['gemm']}."
              + (f" ONNX Runtime: {rows[0]['ort_runtime']}." if rows[0].get("ort_runtime") else ""))


if __name__ == "__main__":
    main()
