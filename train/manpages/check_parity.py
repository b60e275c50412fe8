#!/usr/bin/python3
"""Does locost compute what the PyTorch training code computes? For each model kind at a small
size: seed, train a few steps on random data (so the weights are not at their initialisation),
export with export.py, load the directory in locost's Python module, and compare the encoder's
states (real positions), teacher-forced logits and target log-probabilities (score) on inputs of
several lengths, one of them a padded batch.

    PYTHONPATH=build/ci/python /usr/bin/python3 train/manpages/check_parity.py [--spm MODEL] [--keep DIR]
    PYTHONPATH=build/ci/python /usr/bin/python3 train/manpages/check_parity.py --model DIR --data test.jsonl \
        [--pages 8] [--max-source-tokens N]      # a trained checkpoint on real pages

Prints the largest absolute difference per model and input; exits 1 if one exceeds --tolerance
(1e-4), 2 if locost cannot be imported. Each model is exported twice: in float32, compared with the
model, and in bfloat16 (its weight matrices; export.stored_dtype), compared with the model with
those weights rounded to bfloat16 (what the file holds). Also checks that every stored parameter receives a gradient, and that the safetensors
written read back as the model's tensors.
"""
import argparse
import copy
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

try:
    import torch
except ImportError:  # CTest reads 77 as "skipped" (scripts/install-deps.sh --with-python installs it)
    print("check_parity: skipped: PyTorch is not installed (Debian's python3-torch)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export as export_mod  # noqa: E402
import model as M  # noqa: E402

# the repository's copy of the books vocabulary (examples/data/PROVENANCE.md)
DEFAULT_SPM = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "data", "books-16k.model")

# (name, kind, extra config): T5 v1.1 (gated-gelu, untied head), T5 v1.0's form (relu, tied and
# scaled head), LOCOST (gated-gelu, untied), LOCOST with a tied head and without gating.
VARIANTS = [
    ("t5", "t5", {}),
    ("t5-relu-tied", "t5", {"feed_forward_proj": "relu", "tie_word_embeddings": True}),
    ("locost", "locost", {}),
    ("locost-tied-ungated", "locost", {"tie_word_embeddings": True, "gating": False}),
]


def import_locost(retries=10, wait=60):
    """locost's module; it may be mid-rebuild by someone else: retry for a while."""
    for attempt in range(retries):
        try:
            import locost
            return locost
        except ImportError as e:
            print("import locost failed (%s); retrying in %d s" % (e, wait), flush=True)
            time.sleep(wait)
    return None


def random_inputs(vocab, seed):
    """(name, encoder rows, decoder ids (B, T)) with eos-terminated encoder rows."""
    g = np.random.default_rng(seed)

    def row(n):
        return [int(x) for x in g.integers(3, vocab, n - 1)] + [M.EOS_ID]

    def dec(B, T):
        d = g.integers(3, vocab, (B, T))
        d[:, 0] = M.DECODER_START_ID
        return d.astype(np.int64)

    return [
        ("1 x 17", [row(17)], dec(1, 9)),
        ("1 x 333", [row(333)], dec(1, 20)),
        ("1 x 1500", [row(1500)], dec(1, 12)),
        ("3 padded (50, 120, 7)", [row(50), row(120), row(7)], dec(3, 12)),
    ]


def train_a_little(m, vocab, steps, seed):
    """A few AdamW steps on random pairs, then check every parameter got a gradient."""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
    m.train()
    no_grad = set()
    for step in range(steps):
        rows = [torch.randint(3, vocab, (int(n),), generator=g).tolist() + [1] for n in (40, 90, 25)]
        ids, mask = M.pad_batch(rows)
        labels = torch.randint(3, vocab, (3, 8), generator=g)
        labels[2, 5:] = M.IGNORE_INDEX
        opt.zero_grad()
        loss = m.loss(ids, mask, labels)
        loss.backward()
        if step == 0:
            no_grad = {k for k, p in m.named_parameters() if p.grad is None or not torch.any(p.grad != 0)}
        opt.step()
    m.eval()
    return loss.item(), no_grad


def torch_outputs(m, rows, dec):
    ids, mask = M.pad_batch(rows)
    d = torch.from_numpy(dec)
    with torch.no_grad():
        h = m.encode(ids, mask)
        logits = m(ids, mask, d)
        logp = torch.log_softmax(logits.double(), -1)
    return h.numpy(), mask.numpy().astype(bool), logits.numpy(), logp.numpy()


def compare(locost, m, out, vocab, inputs=None):
    """Largest |diff| between locost reading the checkpoint `out` and the PyTorch model m."""
    lm = locost.Model(out, threads=1)
    worst = 0.0
    for label, rows, dec in inputs or random_inputs(vocab, seed=7):
        ref_h, mask, ref_logits, ref_logp = torch_outputs(m, rows, dec)
        got_h = np.asarray(lm.encode(rows))
        d_states = float(np.abs(got_h - ref_h)[mask].max())  # real positions only
        got = np.asarray(lm.logits(rows, dec))
        d_logits = float(np.abs(got - ref_logits).max())
        # score(): the decoder reads the start token, then the labels: with labels = dec[:, 1:] + eos
        # its inputs are dec itself, and position t predicts labels[t]
        labels = [list(r[1:]) + [int(M.EOS_ID)] for r in dec.tolist()]
        scores = lm.score(rows, labels)
        d_score = 0.0
        for b, lab in enumerate(labels):
            ref = ref_logp[b, np.arange(len(lab)), lab]
            d_score = max(d_score, float(np.abs(np.asarray(scores[b]) - ref).max()))
        worst = max(worst, d_states, d_logits, d_score)
        print("    %-22s max |diff|: encoder states %.1e (|h| <= %.1f), logits %.1e (|logits| <= %.1f), "
              "log-probs %.1e" % (label, d_states, float(np.abs(ref_h[mask]).max()), d_logits,
                                  float(np.abs(ref_logits).max()), d_score))
    lm.close()
    return worst


def rounded_to_bf16(m):
    """A copy of m whose weights are what a bfloat16 checkpoint holds (export.stored_dtype)."""
    r = copy.deepcopy(m)
    with torch.no_grad():
        for name, p in r.named_parameters():
            p.copy_(p.to(export_mod.stored_dtype(name, p, "bfloat16")).float())
    return r


def check_variant(locost, name, kind, extra, spm, vocab, steps, dtypes, keep):
    torch.manual_seed(1234)
    cfg = M.make_config(kind, vocab, d_model=64, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4, d_kv=16,
                        d_state=16, dropout_rate=0.1, **extra)
    m = M.Seq2Seq(cfg, seed=1234)
    loss, no_grad = train_a_little(m, vocab, steps, seed=99)
    problems = []
    if no_grad:
        problems.append("no gradient reached: " + ", ".join(sorted(no_grad)))
    print("%s (%s, %d parameters, loss after %d random steps %.3f)" % (name, kind, M.count_parameters(m), steps, loss))
    root = keep or tempfile.mkdtemp(prefix="parity-")
    worst = 0.0
    for dtype in dtypes:
        ref = m if dtype == "float32" else rounded_to_bf16(m)
        out = os.path.join(root, name if dtype == "float32" else name + "-" + dtype)
        export_mod.export(m, out, spm, dtype)
        back = export_mod.read_safetensors(os.path.join(out, "model.safetensors"))
        state = ref.export_state()
        if set(back) != set(state) or any(not torch.equal(back[k], state[k]) for k in back):
            problems.append("%s safetensors: what was written differs from the model's tensors" % dtype)
        print("  %s checkpoint (%d bytes of weights):" % (dtype, os.path.getsize(os.path.join(out, "model.safetensors"))))
        worst = max(worst, compare(locost, ref, out, vocab))
    if not keep:
        shutil.rmtree(root)
    return worst, problems


def pages_inputs(directory, data, pages, max_source, max_target):
    """(name, rows, decoder ids) from the first pages of a JSON-lines file, tokenized as train.py does:
    each page alone, then all of them as one padded batch."""
    from train import PieceEncoder
    enc = PieceEncoder(os.path.join(directory, "spiece.model"))
    rows, targets, names = [], [], []
    with open(data, encoding="utf-8") as f:
        for line in f:
            if len(rows) == pages:
                break
            r = json.loads(line)
            rows.append(enc.encode_truncated(r["document"], max_source))
            targets.append([M.DECODER_START_ID] + enc.encode_truncated(r["summary"], max_target))
            names.append(r.get("id", str(len(rows))))
    out = []
    for name, row, t in zip(names, rows, targets):
        out.append(("%s (%d tokens)" % (name, len(row)), [row], np.array([t], dtype=np.int64)))
    T = min(len(t) for t in targets)
    out.append(("%d pages padded" % len(rows), rows, np.array([t[:T] for t in targets], dtype=np.int64)))
    return out


def check_checkpoint(locost, a):
    """A trained checkpoint directory against its PyTorch model on real pages."""
    m = export_mod.load_checkpoint(a.model)
    max_source = a.max_source_tokens or (512 if m.config["model_type"] == "t5" else 4096)
    inputs = pages_inputs(a.model, a.data, a.pages, max_source, 64)
    print("%s (%s, %d parameters), %d pages of %s, documents cut to %d tokens" % (
        a.model, m.config["model_type"], M.count_parameters(m), a.pages, a.data, max_source))
    worst = compare(locost, m, a.model, m.config["vocab_size"], inputs)
    verdict = "ok" if worst <= a.tolerance else "FAIL"
    print("parity: max |diff| %.2e (tolerance %.0e) %s" % (worst, a.tolerance, verdict))
    return 0 if verdict == "ok" else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spm", default=DEFAULT_SPM, help="SentencePiece model whose vocabulary size the models take")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--steps", type=int, default=5, help="random training steps before the comparison")
    ap.add_argument("--keep", help="write the checkpoints under this directory and keep them")
    ap.add_argument("--dtypes", default="float32,bfloat16", help="checkpoint dtypes to export and compare")
    ap.add_argument("--only", help="comma-separated variant names (%s)" % ", ".join(v[0] for v in VARIANTS))
    ap.add_argument("--model", help="instead: compare this trained checkpoint directory (export.py's) ...")
    ap.add_argument("--data", help="... on the first pages of this JSON-lines file")
    ap.add_argument("--pages", type=int, default=8)
    ap.add_argument("--max-source-tokens", type=int, default=0, help="document tokens (default: T5 512, LOCOST 4096)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    locost = import_locost()
    if locost is None:
        print("locost's Python module cannot be imported (PYTHONPATH=build/ci/python?)")
        return 2
    if a.model:
        return check_checkpoint(locost, a)
    import sentencepiece
    vocab = sentencepiece.SentencePieceProcessor(model_file=a.spm).get_piece_size()
    wanted = set(a.only.split(",")) if a.only else None
    failed = []
    for name, kind, extra in VARIANTS:
        if wanted and name not in wanted:
            continue
        worst, problems = check_variant(locost, name, kind, extra, a.spm, vocab, a.steps, a.dtypes.split(","), a.keep)
        verdict = "ok" if worst <= a.tolerance and not problems else "FAIL"
        print("  => %s: max |diff| %.2e (tolerance %.0e) %s" % (name, worst, a.tolerance, verdict))
        for p in problems:
            print("     " + p)
        if verdict != "ok":
            failed.append(name)
    print("parity: " + ("all ok" if not failed else "FAILED: " + ", ".join(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
