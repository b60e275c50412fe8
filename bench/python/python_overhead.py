#!/usr/bin/python3
"""What the Python module costs over the C++ library: one 4K-token summarize through
`locost.Model.summarize` against the same call through the C++ API (bench/python/summarize_call.cpp),
same checkpoint, same text, same options, in one session.

For each family (default: t5 and locost, their base demo checkpoints: UNTRAINED random weights of
the real shapes, written by `locost demo-checkpoint --config base`) and each of --runs rounds:
  C++:     summarize_call DIR TEXT T N: a fresh process loads the checkpoint, then times
           tokenize → encode → generate → decode under one clock (the library's API, as embed.cpp);
  Python:  a fresh python3 process: Model(DIR, threads=T), then the timed summarize(text, same options)
           (time.perf_counter around the call: argument reading, tokenizing, encode, decode, the
           text back).
Both decode exactly N tokens (min = max), greedy, and their texts must be equal. The figure is
the ratio of the medians, Python / C++ (the issue's bound: <= 1.02).

    python3 bench/python/python_overhead.py --build build/tests --work /tmp/pyover
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

CHILD = r"""
import json, sys, time
import locost
path, text_file, threads, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
text = open(text_file, encoding="utf-8").read()
model = locost.Model(path, threads=threads)
t0 = time.perf_counter()
s = model.summarize(text, max_new_tokens=n, min_new_tokens=n, details=True)
t1 = time.perf_counter()
print(json.dumps({"call_s": t1 - t0, "encode_s": s.encode_seconds, "decode_s": s.decode_seconds, "text": s.text,
                  "input_tokens": s.input_tokens}))
"""



def log(*a):
    print(*a, file=sys.stderr, flush=True)


def source_text(tokenizer, length, out):
    """The first `length` tokens of Pride and Prejudice (examples/data, public domain; PROVENANCE.md
    there), written to `out`."""
    text = open(os.path.join(ROOT, "examples", "data", "pride_and_prejudice.txt"), encoding="utf-8").read()
    lo, hi = 0, len(text)
    while lo < hi:  # the longest prefix of at most `length` tokens
        mid = (lo + hi + 1) // 2
        if len(tokenizer.encode(text[:mid])) <= length:
            lo = mid
        else:
            hi = mid - 1
    with open(out, "w", encoding="utf-8") as f:
        f.write(text[:lo])
    return len(tokenizer.encode(text[:lo]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "tests"),
                    help="a build with the tool, BUILD/bench/summarize_call and the Python module (-DLOCOST_PYTHON=ON)")
    ap.add_argument("--work", default="/tmp/locost-python-overhead")
    ap.add_argument("--families", default="t5,locost")
    ap.add_argument("--length", type=int, default=4096)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--python", default="/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable)
    ap.add_argument("--json")
    a = ap.parse_args()
    tool = os.path.join(a.build, "bin", "locost")
    call = os.path.join(a.build, "bench", "summarize_call")
    pypath = os.path.join(a.build, "python")
    os.makedirs(a.work, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=pypath)
    for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # the machine's own kernels on both sides
        env.pop(k, None)
    sys.path.insert(0, pypath)
    import locost  # noqa: E402

    results = []
    for family in a.families.split(","):
        ck = os.path.join(a.work, family + "-base")
        if not os.path.exists(os.path.join(ck, "config.json")):
            log(f"writing the {family} base demo checkpoint (UNTRAINED random weights) to {ck}")
            subprocess.run([tool, "demo-checkpoint", "--family", family, "--config", "base", "--out", ck], check=True, env=env)
        text_file = os.path.join(a.work, f"{family}-{a.length}.txt")
        tokens = source_text(locost.Tokenizer(ck), a.length, text_file)
        cpp, py = [], []
        for r in range(a.runs):
            # The tool's OpenMP wait policy on both sides (the module sets it itself, tools/locost/main.cpp says why).
            p = subprocess.run([call, ck, text_file, str(a.threads), str(a.new_tokens)], capture_output=True, text=True,
                               env=dict(env, GOMP_SPINCOUNT=env.get("GOMP_SPINCOUNT", "10000")), check=True)
            c = json.loads(p.stdout.strip().splitlines()[-1])
            cpp_text = c["text"]
            cpp.append(c["call_s"])
            q = subprocess.run([a.python, "-c", CHILD, ck, text_file, str(a.threads), str(a.new_tokens)], capture_output=True, text=True,
                               env=env, check=True)
            out = json.loads(q.stdout.strip().splitlines()[-1])
            if out["text"] != cpp_text:
                sys.exit(f"{family}: the Python text differs from the tool's:\n  {out['text']!r}\n  {cpp_text!r}")
            py.append(out["call_s"])
            log(f"{family} round {r + 1}: C++ {cpp[-1]:.3f} s (encode {c['encode_s']:.3f} s, decode {c['decode_s']:.3f} s), "
                f"Python {py[-1]:.3f} s (encode {out['encode_s']:.3f} s, decode {out['decode_s']:.3f} s)")
        row = {"family": family, "input_tokens": tokens, "new_tokens": a.new_tokens, "threads": a.threads, "cpp_s": cpp, "python_s": py,
               "ratio": statistics.median(py) / statistics.median(cpp)}
        results.append(row)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(results, f, indent=1)
    print("| model (base demo, UNTRAINED) | input tokens | C++ call, median (s) | Python call, median (s) | Python / C++ |")
    print("|---|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['family']} | {r['input_tokens']} | {statistics.median(r['cpp_s']):.3f} | {statistics.median(r['python_s']):.3f} | {r['ratio']:.3f} |")


if __name__ == "__main__":
    main()
