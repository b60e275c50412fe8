#!/usr/bin/python3
"""Truncating a long input against reading all of it, on real data: the manual pages of the test
split that are longer than --min-tokens, summarized by

  t5-cut        the T5 reading the first --t5-length tokens (its training length)
  t5-sled       SLED over the same T5: chunks of --sled-context tokens, each chunk's middle kept
  locost-cut    the LOCOST model reading the first --t5-length tokens (the same view as t5-cut)
  locost-train  the LOCOST model reading the first --locost-length tokens (its training length)
  locost-whole  the LOCOST model reading the whole page
  lead          the first sentence of DESCRIPTION (train/manpages/lead_baseline.py)
  t5-whole      (--t5-whole) the T5 reading the whole page with dense attention: quadratic, slow

Every model run is `locost eval` with the same generation settings (--gen), one document at a
time, so each page's encode time and peak memory are its own; the lead baseline is `locost eval
--results`. Writes, under --out: long.jsonl (the pages), NAME.jsonl / NAME.json (each run's
summaries and scores; a rerun resumes them), table.md, comparison.svg, comparison.json.

    bench/manpages/compare.py --t5 examples/models/manpages/t5 --locost-model examples/models/manpages/locost \\
        --data build/manpages/test.jsonl --out build/manpages-compare

Python's standard library only; the tool does the work.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def run(cmd, log):
    log.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
    log.flush()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log.write(p.stdout)
    log.flush()
    if p.returncode != 0:
        sys.exit("compare.py: failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stdout[-3000:]))
    return p.stdout


def token_counts(tool, model, pages, log):
    """Each page's length in the models' tokens (with </s>), as locost tokenizes it."""
    counts = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "page.txt")
        for p in pages:
            with open(path, "w", encoding="utf-8") as f:
                f.write(p["document"])
            out = subprocess.run([tool, "tokenize", "--model", model, "--input", path], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, check=True).stdout
            counts.append(len(json.loads(out)))
    return counts


def interval(scores, key):
    f = scores["rouge"][key]["fmeasure"]
    return 100 * f["low"], 100 * f["mid"], 100 * f["high"]


def svg_chart(rows, path):
    """Grouped bars: ROUGE-1, -2, -L (F ×100) per approach with their 95 % intervals, and each
    approach's total encode time under its group."""
    keys = [("rouge1", "ROUGE-1", "#4c72b0"), ("rouge2", "ROUGE-2", "#dd8452"), ("rougeL", "ROUGE-L", "#55a868")]
    top = max([interval(r["scores"], k)[2] for r in rows for k, _, _ in keys] + [1.0])
    top = 10 * (int(top / 10) + 1)
    W, H, left, right, y0, y1 = 140 + 120 * len(rows), 380, 60, 20, 40, 300
    bar = 26
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="20" font-size="14">Man pages longer than the T5\'s training length: ROUGE F x100 (95%% interval)</text>' % left]

    def y(v):
        return y1 - (y1 - y0) * v / top

    for t in range(0, top + 1, 10):
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (left, W - right, y(t), y(t)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%d</text>' % (left - 6, y(t) + 4, t))
    for i, r in enumerate(rows):
        gx = left + 20 + 120 * i
        for j, (k, _, color) in enumerate(keys):
            lo, mid, hi = interval(r["scores"], k)
            x = gx + j * bar
            out.append('<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"/>' % (x, y(mid), bar - 4, y1 - y(mid), color))
            cx = x + (bar - 4) / 2
            out.append('<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="black"/>' % (cx, cx, y(hi), y(lo)))
        out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>' % (gx + 1.5 * bar, y1 + 18, r["name"]))
        enc = r["scores"]["speed"]["encode_s"]
        out.append('<text x="%d" y="%d" text-anchor="middle" fill="#555">%s</text>' %
                   (gx + 1.5 * bar, y1 + 34, "encode %.1f s" % enc if enc > 0 else "no model"))
    for j, (_, label, color) in enumerate(keys):
        out.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/>' % (left + 110 * j, H - 22, color))
        out.append('<text x="%d" y="%d">%s</text>' % (left + 110 * j + 16, H - 12, label))
    out.append("</svg>")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(out) + "\n")
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tool", default=os.path.join(ROOT, "build", "ci", "bin", "locost"), help="the locost binary")
    ap.add_argument("--t5", required=True, help="the T5 checkpoint directory")
    ap.add_argument("--locost-model", required=True, help="the LOCOST checkpoint directory")
    ap.add_argument("--data", required=True, help="the test split (JSON lines: id, document, summary)")
    ap.add_argument("--out", required=True, help="the results' directory")
    ap.add_argument("--min-tokens", type=int, default=2048, help="pages longer than this many tokens (default 2048)")
    ap.add_argument("--t5-length", type=int, default=512, help="the T5's training length (default 512)")
    ap.add_argument("--locost-length", type=int, default=4096, help="the LOCOST model's training length (default 4096)")
    ap.add_argument("--sled-context", type=int, default=512, help="SLED's chunk length (default 512)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gen", default="--num-beams 4 --max-new-tokens 32 --no-repeat-ngram-size 3",
                    help="generation options of every run")
    ap.add_argument("--t5-whole", action="store_true", help="also the T5 on whole pages (dense attention; slow)")
    a = ap.parse_args()

    os.makedirs(a.out, exist_ok=True)
    log = open(os.path.join(a.out, "compare.log"), "a")
    pages = [json.loads(l) for l in open(a.data, encoding="utf-8") if l.strip()]
    counts = token_counts(a.tool, a.t5, pages, log)
    long_pages = [dict(p, tokens=n) for p, n in zip(pages, counts) if n > a.min_tokens]
    if not long_pages:
        sys.exit("compare.py: no page of %s is longer than %d tokens" % (a.data, a.min_tokens))
    data = os.path.join(a.out, "long.jsonl")
    with open(data + ".tmp", "w", encoding="utf-8") as f:
        for p in long_pages:
            f.write(json.dumps({"id": p["id"], "document": p["document"], "summary": p["summary"]}, ensure_ascii=False) + "\n")
    os.replace(data + ".tmp", data)
    lengths = sorted(p["tokens"] for p in long_pages)
    print("%d of %d pages are longer than %d tokens (median %d, longest %d)" %
          (len(long_pages), len(pages), a.min_tokens, lengths[len(lengths) // 2], lengths[-1]), flush=True)

    gen = shlex.split(a.gen)
    runs = [("t5-cut", a.t5, ["--max-input-tokens", str(a.t5_length)], "first %d tokens" % a.t5_length),
            ("t5-sled", a.t5, ["--sled-context", str(a.sled_context), "--sled-window-fraction", "0.5"],
             "all, in chunks of %d" % a.sled_context),
            ("locost-cut", a.locost_model, ["--max-input-tokens", str(a.t5_length)], "first %d tokens" % a.t5_length),
            ("locost-train", a.locost_model, ["--max-input-tokens", str(a.locost_length)], "first %d tokens" % a.locost_length),
            ("locost-whole", a.locost_model, [], "all")]
    if a.t5_whole:
        runs.append(("t5-whole", a.t5, [], "all (dense attention)"))
    rows = []
    for name, model, extra, reads in runs:
        res, scores = os.path.join(a.out, name + ".jsonl"), os.path.join(a.out, name + ".json")
        cmd = [a.tool, "eval", "--model", model, "--data", data, "--out", res, "--scores", scores,
               "--threads", str(a.threads)] + extra + gen
        if os.path.exists(res):
            cmd.append("--resume")
        print(run(cmd, log), end="", flush=True)
        rows.append({"name": name, "model": os.path.basename(os.path.normpath(model)), "reads": reads,
                     "command": " ".join(shlex.quote(c) for c in cmd), "scores": json.load(open(scores))})
    lead = os.path.join(a.out, "lead.jsonl")
    with open(lead + ".tmp", "w") as f:
        subprocess.run([sys.executable, os.path.join(ROOT, "train", "manpages", "lead_baseline.py"), data], stdout=f, check=True)
    os.replace(lead + ".tmp", lead)
    scores = os.path.join(a.out, "lead.json")
    print(run([a.tool, "eval", "--data", data, "--results", lead, "--scores", scores], log), end="", flush=True)
    rows.append({"name": "lead", "model": "-", "reads": "first sentence of DESCRIPTION", "command": "lead_baseline.py",
                 "scores": json.load(open(scores))})

    table = ["%d test pages longer than %d tokens (median %d, longest %d); ROUGE F x100, Porter stemmer, "
             "95%% bootstrap interval; generation: `%s`; %d threads." %
             (len(long_pages), a.min_tokens, lengths[len(lengths) // 2], lengths[-1], a.gen, a.threads), "",
             "| run | model | reads | ROUGE-1 | ROUGE-2 | ROUGE-L | ROUGE-Lsum | tokens encoded | encode s | encode tokens/s | peak memory |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s = r["scores"]
        cells = ["%.2f (%.2f–%.2f)" % (m, lo, hi) for lo, m, hi in (interval(s, k) for k in ("rouge1", "rouge2", "rougeL"))]
        cells.append("%.2f" % interval(s, "rougeLsum")[1])
        sp = s["speed"]
        if sp["encode_s"] > 0:
            cells += ["{:,}".format(sp["input_tokens"]), "%.1f" % sp["encode_s"], "{:,.0f}".format(sp["encode_tokens_per_s"]),
                      "%.0f MiB" % (s["peak_rss_bytes"] / 2**20)]
        else:
            cells += ["-", "-", "-", "-"]
        table.append("| %s | %s | %s | %s |" % (r["name"], r["model"], r["reads"], " | ".join(cells)))
    text = "\n".join(table) + "\n"
    for path, content in ((os.path.join(a.out, "table.md"), text),
                          (os.path.join(a.out, "comparison.json"), json.dumps(rows, indent=1) + "\n")):
        with open(path + ".tmp", "w") as f:
            f.write(content)
        os.replace(path + ".tmp", path)
    svg_chart(rows, os.path.join(a.out, "comparison.svg"))
    print(text, end="")


if __name__ == "__main__":
    main()
