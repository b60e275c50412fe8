#!/usr/bin/python3
"""bm_gemm's JSON output (--benchmark_format=json) as the markdown table of bench/RESULTS.md.
    build/dev/bench/bm_gemm --benchmark_format=json > gemm.json && python3 bench/kernels/gemm_table.py gemm.json"""
import collections
import json
import sys

d = json.load(open(sys.argv[1]))
rows = collections.OrderedDict()
for b in d["benchmarks"]:
    parts = b["name"].split("/")
    kind = parts[0].replace("BM_gemm_", "")
    key = tuple(p.split(":")[1] for p in parts[1:6])  # M, K, N, threads, rotate
    rows.setdefault(key, {})[kind] = (b["GFLOP/s"], b.get("GB/s"))


def cell(v, kind, few_rows):
    if kind not in v:
        return "-"
    gflops, gbs = v[kind]
    return f"{gflops:.1f} ({gbs:.1f} GB/s)" if few_rows and gbs is not None else f"{gflops:.1f}"


label = next((b.get("label", "") for b in d["benchmarks"] if b["name"].startswith("BM_gemm_locost")), "")
print(f"locost's float32 provider: {label}\n")
print("| M | K | N | threads | W from DRAM | Eigen GFLOP/s | OpenBLAS sgemm | oneDNN sgemm | locost | locost / OpenBLAS | OpenBLAS sgemv |")
print("|---:|---:|---:|---:|:---:|---:|---:|---:|---:|---:|---:|")
for k, v in rows.items():
    few = int(k[0]) <= 8
    ratio = v["locost"][0] / v["openblas"][0]
    print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {'yes' if k[4] == '1' else 'no'} | {cell(v, 'eigen', few)} | "
          f"{cell(v, 'openblas', few)} | {cell(v, 'onednn', few)} | {cell(v, 'locost', few)} | {ratio:.2f} | {cell(v, 'sgemv', few)} |")
