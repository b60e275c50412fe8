#!/usr/bin/python3
"""A quick test of train.py on a synthetic corpus it writes itself, for both model kinds:

  1. an uninterrupted run of --steps steps;
  2. the same run interrupted three ways (--stop-after, SIGTERM, --max-minutes) and resumed with
     --resume until it finishes;
  3. checks: the training loss goes down, loss.csv and valid.csv of both runs are equal (but for
     the elapsed-time column), the final weights are bit-identical, and the exported checkpoint
     directories hold the same model.safetensors.

    /usr/bin/python3 train/manpages/smoke_test.py [--kinds t5,locost] [--steps 20] [--keep DIR]

The synthetic pages look like manual pages: a NAME-less document whose DESCRIPTION's first
sentence is the summary, padded with filler sentences to 30-400 words. Sizes are tiny and the runs
use one thread.
"""
import argparse
import csv
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile

try:
    import torch  # noqa: F401  (train.py's)
except ImportError:  # CTest reads 77 as "skipped"
    print("smoke_test: skipped: PyTorch is not installed (Debian's python3-torch)")
    sys.exit(77)
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable
# the repository's copy of the books vocabulary (examples/data/PROVENANCE.md)
DEFAULT_SPM = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "data", "books-16k.model")

SYLLABLES = ["ar", "be", "con", "de", "fi", "gen", "in", "lo", "man", "net", "or", "pro", "re", "sys", "tar", "ul",
             "ver", "x", "zip", "ch", "dir", "file", "mount", "user"]
VERBS = ["print", "list", "copy", "remove", "create", "show", "convert", "compress", "search", "mount", "format",
         "check", "display", "edit", "sort"]
OBJECTS = ["files", "directories", "archives", "network interfaces", "user accounts", "disk partitions", "manual pages",
           "text lines", "kernel modules", "system logs", "fonts", "images", "packages", "processes"]
FILLER = ["The options are as follows.", "This program reads its input from standard input.",
          "Exit status is zero on success.", "See the documentation for details.",
          "Long options may be abbreviated.", "The default is to be verbose.", "Report bugs to the maintainer.",
          "Environment variables override the configuration file.", "This option may be given more than once."]


def synthetic_pages(n, seed):
    rng = random.Random(seed)
    pages = []
    for k in range(n):
        name = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3)))
        summary = "%s %s" % (rng.choice(VERBS), rng.choice(OBJECTS))
        opts = " ".join("-%s" % rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 4)))
        body = [summary[0].upper() + summary[1:] + " with %s." % name]
        words = rng.randint(30, 400)
        while sum(len(s.split()) for s in body) < words:
            body.append(rng.choice(FILLER))
        doc = "SYNOPSIS\n       %s [%s] [FILE]...\n\nDESCRIPTION\n       %s" % (name, opts, " ".join(body))
        pages.append({"id": "%s.%d" % (name, k), "document": doc, "summary": summary, "package": name})
    return pages


def write_jsonl(path, pages):
    with open(path, "w") as f:
        for p in pages:
            f.write(json.dumps(p) + "\n")


def read_csv(path, drop=("elapsed_s",)):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return [{k: v for k, v in r.items() if k not in drop} for r in rows]


def train_cmd(kind, data, spm, out, steps, extra=()):
    cmd = [PY, os.path.join(HERE, "train.py"), "--kind", kind, "--train", os.path.join(data, "train.jsonl"),
           "--valid", os.path.join(data, "validation.jsonl"), "--spm", spm, "--out", out,
           "--d-model", "32", "--d-ff", "64", "--layers", "2", "--decoder-layers", "2", "--heads", "4", "--d-kv", "8",
           "--d-state", "16", "--max-source-tokens", "256", "--max-target-tokens", "16", "--batch-tokens", "1024",
           "--pad-to-multiple", "16", "--lr", "3e-3", "--warmup", "5", "--max-steps", str(steps), "--save-every", "5",
           "--eval-every", "10", "--log-every", "5", "--valid-docs", "40", "--threads", "1", "--seed", "3"]
    return cmd + list(extra)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.stdout.write(r.stdout + r.stderr)
        raise SystemExit("failed: %s" % " ".join(cmd))
    return r.stdout + r.stderr


def interrupted_run(kind, data, spm, out, steps):
    """--stop-after 4, then SIGTERM during the resumed run, then --max-minutes, then to the end."""
    run(train_cmd(kind, data, spm, out, steps, ["--stop-after", "4"]))
    p = subprocess.Popen(train_cmd(kind, data, spm, out, steps, ["--resume"]), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    # wait for the resumed run to train a step past its save, then interrupt it
    loss_csv = os.path.join(out, "loss.csv")
    deadline = time.time() + 300
    while time.time() < deadline and p.poll() is None:
        with open(loss_csv) as f:
            if sum(1 for _ in f) - 1 >= 6:
                break
        time.sleep(0.05)
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    text = p.communicate()[0]
    if p.returncode != 0:
        sys.stdout.write(text)
        raise SystemExit("the SIGTERM'd run failed")
    stops = 2
    for _ in range(100):
        text = run(train_cmd(kind, data, spm, out, steps, ["--resume", "--max-minutes", "0.002"]))
        stops += 1
        if "finished:" in text:
            break
    return stops


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kinds", default="t5,locost")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--spm", default=DEFAULT_SPM)
    ap.add_argument("--keep", help="work in this directory and keep it")
    a = ap.parse_args()
    root = a.keep or tempfile.mkdtemp(prefix="train-smoke-")
    os.makedirs(root, exist_ok=True)
    data = os.path.join(root, "data")
    os.makedirs(data, exist_ok=True)
    write_jsonl(os.path.join(data, "train.jsonl"), synthetic_pages(300, seed=1))
    write_jsonl(os.path.join(data, "validation.jsonl"), synthetic_pages(40, seed=2))
    failures = []
    for kind in a.kinds.split(","):
        whole, parts = os.path.join(root, kind + "-whole"), os.path.join(root, kind + "-parts")
        for d in (whole, parts):
            shutil.rmtree(d, ignore_errors=True)
        t0 = time.time()
        run(train_cmd(kind, data, a.spm, whole, a.steps))
        t_whole = time.time() - t0
        stops = interrupted_run(kind, data, a.spm, parts, a.steps)
        loss_a, loss_b = read_csv(os.path.join(whole, "loss.csv")), read_csv(os.path.join(parts, "loss.csv"))
        valid_a, valid_b = read_csv(os.path.join(whole, "valid.csv")), read_csv(os.path.join(parts, "valid.csv"))
        import torch
        wa = torch.load(os.path.join(whole, "checkpoint.pt"))["model"]
        wb = torch.load(os.path.join(parts, "checkpoint.pt"))["model"]
        same_weights = wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
        with open(os.path.join(whole, "model", "model.safetensors"), "rb") as f1, \
                open(os.path.join(parts, "model", "model.safetensors"), "rb") as f2:
            same_export = f1.read() == f2.read()
        first = sum(float(r["train_loss"]) for r in loss_a[:3]) / 3
        last = sum(float(r["train_loss"]) for r in loss_a[-3:]) / 3
        print("%s: %d steps in %.0f s; train loss %.3f (steps 1-3) -> %.3f (last 3); validation %s" % (
            kind, len(loss_a), t_whole, first, last, ", ".join("%s: %s" % (r["step"], r["valid_loss"]) for r in valid_a)))
        print("  interrupted run: %d invocations; loss.csv equal: %s; valid.csv equal: %s; final weights "
              "bit-identical: %s; exported safetensors identical: %s" % (
                  stops, loss_a == loss_b, valid_a == valid_b, same_weights, same_export))
        if not (last < first and loss_a == loss_b and valid_a == valid_b and same_weights and same_export
                and len(loss_a) == a.steps):
            failures.append(kind)
    if not a.keep:
        shutil.rmtree(root)
    print("smoke test: " + ("ok" if not failures else "FAILED: " + ", ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
