#!/usr/bin/python3
"""Side by side: the ORIGINAL LOCOST encoder (PyTorch, CPU) against ours, base size, 2 threads.

For each length L (default 1024, 4096, 16384), alternately in one session:
  (a) original  /usr/bin/time -v python3 BASELINE --child encoder --d-state 512 --length L
                --runs R --warmup 1   (random weights, original init; every forward generates its
                S4D kernels; BASELINE prints the median seconds and the time spent in kernel
                generation). Run without OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, as its README says.
  (b) ours, cold, one process:  /usr/bin/time -v locost encode --model MODEL --ids RANDOM.json
                --out TMP --threads 2   (the tool's own tokens/s covers kernel generation + encode;
                "process" tokens/s = L / the whole process's wall time: start-up, weight load,
                kernel generation, encode, writing the output; peak RSS is the whole process)
  (c) ours, in process:  bm_encoder --benchmark_filter='BM_encoder_(cold|warm)/L/2/'
                cold = kernel generation + encode (what the original's forward does),
                warm = kernel cache filled by a first call (repeated calls)
and once at the start this machine's yardsticks: bm_peak (FMA peak, 2 threads) and bm_gemm
(OpenBLAS's best GFLOP/s at the base shapes, M = 4096, 2 threads, and ours beside it).
Then prints markdown tables (and writes them to --md, the raw numbers to --json).

Every measurement records "foreign": the share of the machine's CPU capacity other processes
used meanwhile (/proc/stat minus the command's own CPU time). The machine is shared; rerun what
is dirty (> 0.05).

MODEL is the base demo checkpoint (`locost demo-checkpoint --config base --out build/demo-base`):
UNTRAINED random weights, same shapes as the original's random model, so the timings compare.

Paths: --build (our build dir holding bin/locost and bench/bm_*), --model, --ref-root (the
original code clones, REF_ROOT of the shared tools, default /tmp/ref), --tools (the shared
folder's tools/original with baseline.py). The shared folder (/work/shared) and the clones exist
only on the development machines of this project, not in the repository: elsewhere, get the tools
and run their setup.sh first, or pass --skip-original to measure ours only.

Stdlib only; run with Debian's /usr/bin/python3 (the original needs its python3-torch):
    /usr/bin/python3 bench/peers/compare_original.py --md /tmp/compare.md --json /tmp/compare.json
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)  # bench/, which holds the shared timed.py
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
from timed import run_timed  # noqa: E402

THREADS = 2


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def machine():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    info = {}
    for line in out.splitlines():
        k, _, v = line.partition(":")
        if k.strip() in ("Model name", "CPU(s)", "Hypervisor vendor", "L2 cache", "L3 cache"):
            info[k.strip()] = v.strip()
        if k.strip() == "Flags":
            fl = v.split()
            info["simd"] = " ".join(f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile") if f in fl)
    mem = [l for l in open("/proc/meminfo") if l.startswith("MemTotal")]
    info["MemTotal"] = mem[0].split(":")[1].strip() if mem else "?"
    return info


def bench_json(binary, filt, env=None, extra=()):
    """Runs a Google Benchmark binary with a filter under time -v; returns (benchmarks, timed)."""
    r = run_timed([binary, "--benchmark_filter=" + filt, "--benchmark_format=json"] + list(extra), env=env)
    if r["rc"] != 0:
        raise SystemExit(f"{binary} failed (rc {r['rc']}):\n{r['stderr_tail']}")
    return json.loads(r["stdout"])["benchmarks"], r


def original_env(ref_root):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    env.update(OMP_NUM_THREADS=str(THREADS), OPENBLAS_NUM_THREADS=str(THREADS), MKL_NUM_THREADS=str(THREADS),
               LOCOST_VAND_PRECISION="float32", REF_ROOT=ref_root)
    return env


def run_original(a, L, runs):
    cmd = ["/usr/bin/python3", os.path.join(a.tools, "baseline.py"), "--child", "encoder", "--d-state", "512",
           "--length", str(L), "--runs", str(runs), "--warmup", "1"]
    r = run_timed(cmd, env=original_env(a.ref_root))
    line = [l for l in r["stdout"].splitlines() if l.startswith("RESULT ")]
    if r["rc"] != 0 or not line:
        raise SystemExit(f"original failed (rc {r['rc']}):\n{r['stderr_tail']}")
    res = json.loads(line[-1][7:])
    return {"tokens_per_s": res["tokens_per_s"], "median_s": res["median_s"], "runs_s": res["runs_s"],
            "ssm_kernel_s": res["ssm_kernel_s"], "fftconv_s": res["fftconv_s"],
            "foreign_per_run": res["foreign_cpu_frac_per_run"], "peak_rss_mib": r.get("peak_rss_mib"),
            "process_wall_s": r["wall_s"], "foreign": r["foreign_frac"], "cmd": " ".join(cmd)}


def run_cli(a, L, tmp):
    ids_path = os.path.join(tmp, f"ids_{L}.json")
    rng = random.Random(L)
    with open(ids_path, "w") as f:
        json.dump([rng.randrange(2, 32100) for _ in range(L)], f)
    out = os.path.join(tmp, f"out_{L}.safetensors")
    cmd = [os.path.join(a.build, "bin", "locost"), "encode", "--model", a.model, "--ids", ids_path, "--out", out,
           "--threads", str(THREADS)]
    r = run_timed(cmd)
    if os.path.exists(out):
        os.remove(out)
    m = re.search(r"encoded (\d+) x (\d+) tokens in ([\d.]+) s: (\d+) tokens/s, peak memory ([\d.]+) GB", r["stderr_tail"])
    if r["rc"] != 0 or not m:
        raise SystemExit(f"locost encode failed (rc {r['rc']}):\n{r['stderr_tail']}")
    return {"tokens_per_s": float(m.group(4)), "encode_s": float(m.group(3)), "peak_rss_mib": r.get("peak_rss_mib"),
            "process_wall_s": r["wall_s"], "foreign": r["foreign_frac"], "cmd": " ".join(cmd)}


def run_bm_encoder(a, L):
    env = dict(os.environ, LOCOST_BENCH_MODEL=a.model)
    binary = os.path.join(a.build, "bench", "bm_encoder")
    out = {}
    # cold first, then warm, each in its own process (own peak RSS)
    for kind in ("cold", "warm"):
        bms, r = bench_json(binary, f"BM_encoder_{kind}/{L}/{THREADS}/", env=env)
        b = bms[0]
        out[kind] = {"tokens_per_s": b["tokens/s"], "seconds": b["real_time"] / 1e3, "gemm_gflops": b["GEMM_GFLOP/s"],
                     "foreign": b["foreign"], "iterations": b["iterations"], "peak_rss_mib": r.get("peak_rss_mib"),
                     "cmd": f"LOCOST_BENCH_MODEL={a.model} {binary} --benchmark_filter='BM_encoder_{kind}/{L}/{THREADS}/'"}
    return out


def yardsticks(a):
    peak, r1 = bench_json(os.path.join(a.build, "bench", "bm_peak"), f"BM_fma_peak/{THREADS}/")
    gemm, r2 = bench_json(os.path.join(a.build, "bench", "bm_gemm"), f"BM_gemm_(openblas|locost)/M:4096/K:[0-9]+/N:[0-9]+/threads:{THREADS}/")
    ob = [b for b in gemm if b["name"].startswith("BM_gemm_openblas")]
    ours = [b for b in gemm if b["name"].startswith("BM_gemm_locost")]
    return {"peak_gflops": peak[0]["GFLOP/s"], "peak_foreign": r1["foreign_frac"],
            "openblas_best_gflops": max(b["GFLOP/s"] for b in ob),
            "openblas": {b["name"]: round(b["GFLOP/s"], 1) for b in ob},
            "ours_gemm": {b["name"]: round(b["GFLOP/s"], 1) for b in ours}, "gemm_foreign": r2["foreign_frac"]}


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def table(results, ys, info):
    L = []
    L.append(f"Machine: {info.get('Model name')}, {info.get('CPU(s)')} CPUs ({info.get('Hypervisor vendor', 'bare metal')}), "
             f"{info.get('MemTotal')}, SIMD: {info.get('simd')}. Threads: {THREADS} everywhere. "
             "Our model: the base demo checkpoint (UNTRAINED random weights); the original: random weights, original init.\n")
    L.append("| L | original tok/s (median s) | original kernel gen s | ours cold tok/s | ours CLI tok/s (gen+encode) | "
             "ours CLI process tok/s (whole process) | ours warm tok/s | cold / original | CLI / original | "
             "CLI process / original | warm / original | foreign (orig, CLI, cold, warm) |")
    L.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for Ls, rs in results.items():
        o = med(r["original"]["tokens_per_s"] for r in rs) if "original" in rs[0] else None
        osec = med(r["original"]["median_s"] for r in rs) if o else None
        ok = med(r["original"]["ssm_kernel_s"] for r in rs) if o else None
        c = med(r["bm"]["cold"]["tokens_per_s"] for r in rs)
        cli = med(r["cli"]["tokens_per_s"] for r in rs)
        clip = med(int(Ls) / r["cli"]["process_wall_s"] for r in rs)
        w = med(r["bm"]["warm"]["tokens_per_s"] for r in rs)
        fr = "; ".join(f"{r['original']['foreign'] if o else '-'}, {r['cli']['foreign']}, {r['bm']['cold']['foreign']:.3f}, "
                       f"{r['bm']['warm']['foreign']:.3f}" for r in rs)
        ratio = (lambda x: f"{x / o:.2f}×") if o else (lambda x: "-")
        L.append(f"| {Ls} | {f'{o:.0f} ({osec:.2f})' if o else '-'} | {f'{ok:.2f}' if o else '-'} | {c:.0f} | {cli:.0f} | {clip:.0f} | {w:.0f} | "
                 f"{ratio(c)} | {ratio(cli)} | {ratio(clip)} | {ratio(w)} | {fr} |")
    L.append("")
    L.append("| L | peak RSS original MiB | peak RSS ours CLI MiB | peak RSS bm_encoder cold MiB | ours GEMM GFLOP/s cold / warm | "
             f"warm vs FMA peak ({ys['peak_gflops']:.0f}) | warm vs OpenBLAS best ({ys['openblas_best_gflops']:.0f}) |")
    L.append("|---:|---:|---:|---:|---:|---:|---:|")
    for Ls, rs in results.items():
        orss = med(r["original"]["peak_rss_mib"] for r in rs) if "original" in rs[0] else None
        crss = med(r["cli"]["peak_rss_mib"] for r in rs)
        brss = med(r["bm"]["cold"]["peak_rss_mib"] for r in rs)
        gc = med(r["bm"]["cold"]["gemm_gflops"] for r in rs)
        gw = med(r["bm"]["warm"]["gemm_gflops"] for r in rs)
        L.append(f"| {Ls} | {f'{orss:.0f}' if orss else '-'} | {crss:.0f} | {brss:.0f} | {gc:.1f} / {gw:.1f} | "
                 f"{100 * gw / ys['peak_gflops']:.0f} % | {100 * gw / ys['openblas_best_gflops']:.0f} % |")
    L.append("")
    L.append("GEMM GFLOP/s = 2·12·(3·H² + 3·H·F)·L / (whole forward seconds): the GEMM work of the forward over its "
             "whole time (convolution and kernel generation included), i.e. the rate the forward would need if it "
             f"were GEMMs only. Yardsticks (2 threads): bm_peak {ys['peak_gflops']:.1f} GFLOP/s (foreign {ys['peak_foreign']}), "
             f"bm_gemm OpenBLAS at M=4096 {ys['openblas']}, ours {ys['ours_gemm']} (foreign {ys['gemm_foreign']}).")
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--model", default=os.path.join(ROOT, "build", "demo-base"))
    ap.add_argument("--ref-root", default=os.environ.get("REF_ROOT", "/tmp/ref"))
    ap.add_argument("--tools", default="/work/shared/tools/original")
    ap.add_argument("--lengths", default="1024,4096,16384")
    ap.add_argument("--runs", default="", help="original's --runs per length, e.g. 3,3,2 (default: 3 up to 4K, else 2)")
    ap.add_argument("--rounds", type=int, default=1, help="alternations per length (medians are reported)")
    ap.add_argument("--skip-original", action="store_true")
    ap.add_argument("--md", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--from-json", default="", help="only print the tables of an earlier --json file")
    a = ap.parse_args()
    if a.from_json:
        d = json.load(open(a.from_json))
        print(table(d["results"], d["yardsticks"], d["machine"]))
        return
    a.model = os.path.abspath(a.model)
    lengths = [int(x) for x in a.lengths.split(",")]
    runs = [int(x) for x in a.runs.split(",")] if a.runs else [3 if L <= 4096 else 2 for L in lengths]
    if not a.skip_original and not os.path.exists(os.path.join(a.tools, "baseline.py")):
        raise SystemExit(f"{a.tools}/baseline.py not found (the shared tools exist only on dev machines); "
                         "pass --tools or --skip-original")

    info = machine()
    log("machine", info)
    log("yardsticks: bm_peak, bm_gemm")
    ys = yardsticks(a)
    log(ys)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for L, R in zip(lengths, runs):
            results[L] = []
            for rnd in range(a.rounds):
                row = {}
                if not a.skip_original:
                    log(f"L={L} round {rnd}: original ({R} runs + 1 warm-up)")
                    row["original"] = run_original(a, L, R)
                    log(row["original"])
                log(f"L={L} round {rnd}: ours, locost encode")
                row["cli"] = run_cli(a, L, tmp)
                log(row["cli"])
                log(f"L={L} round {rnd}: ours, bm_encoder cold + warm")
                row["bm"] = run_bm_encoder(a, L)
                log(row["bm"])
                results[L].append(row)
                if a.json:
                    json.dump({"machine": info, "yardsticks": ys, "results": results}, open(a.json, "w"), indent=1)
    md = table(results, ys, info)
    print(md)
    if a.md:
        open(a.md, "w").write(md)
    if a.json:
        json.dump({"machine": info, "yardsticks": ys, "results": results}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
