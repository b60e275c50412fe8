#!/usr/bin/env python3
"""The memory estimate against the measured peak: for each input length and command, runs the
tool once with --dry-run (the estimate it would check against the budget) and once for real under
/usr/bin/time -v (peak RSS of the whole process), and prints a markdown table (estimate / measured).

  bench/memory/estimate_vs_peak.py --tool build/tests/bin/locost --model DEMO_DIR \
      --text examples/data/war_and_peace.txt --tokens 4096,65536 --commands encode,summarize

Inputs are prefixes of --text cut at a whitespace so that they tokenize to about the asked number
of tokens (the exact count is taken from the tool); 0 means the whole text. summarize runs greedy
with --max-new-tokens and --min-new-tokens N (default 64).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def tokens_of(tool, model, path):
    rc, out, err = run([tool, "tokenize", "--model", model, "--input", path])
    if rc != 0:
        sys.exit(f"tokenize failed: {err}")
    return len(json.loads(out))


def prefix_file(tool, model, text, want, tmp):
    """A prefix of `text` with about `want` tokens (0: all of it), and its exact token count."""
    path = os.path.join(tmp, f"prefix-{want}.txt")
    if want == 0:
        with open(path, "w") as f:
            f.write(text)
        return path, tokens_of(tool, model, path)
    cut = min(len(text), int(want * 4.5))
    for _ in range(6):  # scale the cut by the tokens it gave
        end = text.rfind(" ", 0, cut)
        with open(path, "w") as f:
            f.write(text[: end if end > 0 else cut])
        n = tokens_of(tool, model, path)
        if abs(n - want) <= want * 0.01 or cut >= len(text):
            break
        cut = min(len(text), int(cut * want / n))
    return path, n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--tokens", default="4096,65536")
    ap.add_argument("--commands", default="encode,summarize")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--json", help="write the rows here too")
    a = ap.parse_args()
    text = open(a.text, encoding="utf-8").read()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for want in [int(x) for x in a.tokens.split(",")]:
            path, n = prefix_file(a.tool, a.model, text, want, tmp)
            for command in a.commands.split(","):
                args = [a.tool, command, "--model", a.model, "--input", path]
                if command == "encode":
                    args += ["--out", os.path.join(tmp, "states.safetensors")]
                else:
                    args += ["--max-new-tokens", str(a.new_tokens), "--min-new-tokens", str(a.new_tokens)]
                rc, out, err = run(args + ["--dry-run"])
                m = re.search(r"estimated peak ([0-9.]+) (MB|GB|TB)", out)
                if rc != 0 or not m:
                    sys.exit(f"dry run failed: {err}{out}")
                est = float(m.group(1)) * {"MB": 1e6, "GB": 1e9, "TB": 1e12}[m.group(2)]
                phase = re.search(r"^  (\w+) +\S+ \S+ \(peak\)", out, re.M).group(1)
                rc, out, err = run(["/usr/bin/time", "-v"] + args)
                if rc != 0:
                    sys.exit(f"{command} failed: {err[-2000:]}")
                peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", err).group(1)) * 1024
                row = {"command": command, "tokens": n, "estimate_bytes": est, "peak_rss_bytes": peak, "peak_phase": phase,
                       "ratio": est / peak}
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
                os.path.exists(os.path.join(tmp, "states.safetensors")) and os.remove(os.path.join(tmp, "states.safetensors"))
    print("| command | input tokens | estimate | measured peak RSS | estimate / measured | phase of the estimated peak |")
    print("|---|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['command']} | {r['tokens']} | {r['estimate_bytes'] / 1e9:.2f} GB | {r['peak_rss_bytes'] / 1e9:.2f} GB | "
              f"{r['ratio']:.3f} | {r['peak_phase']} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
