#!/usr/bin/python3
"""Train a small T5 or LOCOST summarizer on JSON lines ({"document", "summary"} per line, as
make_dataset.py writes them), with Debian's PyTorch, and export it for locost.

    train.py --kind t5 --train D/train.jsonl --valid D/validation.jsonl --spm SPM.model --out RUN \\
        --max-source-tokens 512 --max-steps 6000 --max-minutes 115 --threads 2
    train.py ... --resume            # the same command again: continues from RUN's latest save
    train.py --out RUN --export-only [--export DIR] [--export-dtype bfloat16]

Data: documents are tokenized with the SentencePiece model as locost tokenizes them (PieceEncoder:
ids + eos, truncated to --max-source-tokens), summaries likewise to --max-target-tokens. Each epoch the training pages are
shuffled (seeded by --seed and the epoch), cut into pools, each pool sorted by length and packed
into batches of at most --batch-tokens padded source tokens (and --max-batch-rows rows), and the
batches shuffled. The data position is (epoch, batch), so a resumed run sees the same batches.

Optimisation: AdamW (no weight decay on norms, biases, D and the SSM's kernel parameters, which
also take --ssm-lr, at most --lr, as the S4 recipe does), linear warm-up over --warmup steps, then
inverse square root (--schedule inverse_sqrt) or linear decay to 0 at --max-steps; gradients
clipped to --clip. Loss: mean cross-entropy per target token.

RUN/ holds:
    checkpoint.pt   the latest save (model, optimizer, scheduler, RNG states, data position,
                    counters): every --save-every steps, at --max-minutes, on SIGINT/SIGTERM, and at
                    the end. Written to a temporary file and renamed, so it is always whole.
    best.pt         the model weights with the lowest validation loss so far
    loss.csv        step, tokens (real source + target tokens so far), target_tokens, train_loss, lr,
                    elapsed_s — one row per step
    valid.csv       step, tokens, valid_loss, elapsed_s — every --eval-every steps and at the end
    run.json        the command's recipe (for --resume: the recipe must be the same)
    model/          the exported checkpoint (export.py) at the end: best.pt's weights unless
                    --export-final
A resumed run truncates loss.csv and valid.csv to the save it continues from, so the files read as
one uninterrupted run; with the same --threads its numbers equal an uninterrupted run's.
"""
import argparse
import csv
import hashlib
import json
import math
import os
import random
import signal
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export as export_mod  # noqa: E402
import model as M  # noqa: E402

# What defines the run: a resume must agree on these (the rest may change between invocations).
RECIPE = ["kind", "train", "valid", "spm", "d_model", "d_ff", "layers", "decoder_layers", "heads", "d_kv", "d_state",
          "feed_forward_proj", "tie", "no_gating", "dropout", "max_source_tokens", "max_target_tokens", "batch_tokens",
          "max_batch_rows", "pool_batches", "pad_to_multiple", "lr", "ssm_lr", "warmup", "schedule", "max_steps",
          "weight_decay", "clip", "beta2", "seed", "valid_docs"]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_argument_group("data")
    g.add_argument("--train", help="training JSON lines")
    g.add_argument("--valid", help="validation JSON lines")
    g.add_argument("--spm", help="SentencePiece model (pad 0, eos 1, unk 2, no bos: T5's ids)")
    g.add_argument("--max-source-tokens", type=int, default=512, help="document tokens kept, eos included")
    g.add_argument("--max-target-tokens", type=int, default=64, help="summary tokens kept, eos included")
    g.add_argument("--valid-docs", type=int, default=500, help="validation pages evaluated (a fixed subset; 0: all)")
    g = ap.add_argument_group("model")
    g.add_argument("--kind", choices=["t5", "locost"], default="t5")
    g.add_argument("--d-model", type=int, default=256)
    g.add_argument("--d-ff", type=int, default=None, help="default: 4 x d_model (gated: 8/3 x, rounded to 64)")
    g.add_argument("--layers", type=int, default=4, help="encoder blocks")
    g.add_argument("--decoder-layers", type=int, default=4)
    g.add_argument("--heads", type=int, default=None, help="default: d_model / d_kv")
    g.add_argument("--d-kv", type=int, default=64)
    g.add_argument("--d-state", type=int, default=64, help="LOCOST: N (N/2 complex modes per channel)")
    g.add_argument("--no-gating", action="store_true", help="LOCOST: no gate on the convolution's output")
    g.add_argument("--feed-forward-proj", default="gated-gelu")
    g.add_argument("--tie", action="store_true", help="tie the LM head to the embedding (and scale by d_model^-0.5)")
    g.add_argument("--dropout", type=float, default=0.1)
    g = ap.add_argument_group("optimisation")
    g.add_argument("--batch-tokens", type=int, default=8192, help="padded source tokens per batch")
    g.add_argument("--max-batch-rows", type=int, default=64)
    g.add_argument("--pool-batches", type=int, default=50, help="batches per length-sorted pool")
    g.add_argument("--pad-to-multiple", type=int, default=64, help="source length of a batch rounded up to this")
    g.add_argument("--lr", type=float, default=1e-3)
    g.add_argument("--ssm-lr", type=float, default=1e-3, help="LOCOST kernel parameters' peak lr (capped at --lr)")
    g.add_argument("--warmup", type=int, default=500)
    g.add_argument("--schedule", choices=["inverse_sqrt", "linear"], default="inverse_sqrt")
    g.add_argument("--max-steps", type=int, default=5000)
    g.add_argument("--weight-decay", type=float, default=0.01)
    g.add_argument("--beta2", type=float, default=0.999)
    g.add_argument("--clip", type=float, default=1.0)
    g.add_argument("--seed", type=int, default=1)
    g = ap.add_argument_group("run")
    g.add_argument("--out", required=True, help="run directory")
    g.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    g.add_argument("--threads", type=int, default=2)
    g.add_argument("--device", default="cpu")
    g.add_argument("--max-minutes", type=float, default=0, help="save and stop after this long (0: no limit)")
    g.add_argument("--save-every", type=int, default=200)
    g.add_argument("--eval-every", type=int, default=200)
    g.add_argument("--log-every", type=int, default=10)
    g.add_argument("--stop-after", type=int, default=0, help="save and stop after this many steps of this invocation (tests)")
    g = ap.add_argument_group("export")
    g.add_argument("--export", help="checkpoint directory to write at the end (default OUT/model)")
    g.add_argument("--no-export", action="store_true")
    g.add_argument("--export-only", action="store_true", help="export from OUT's saves, no training")
    g.add_argument("--export-final", action="store_true", help="export the last weights, not the best validation ones")
    g.add_argument("--export-dtype", choices=["float32", "bfloat16"], default="float32")
    g.add_argument("--max-new-tokens", type=int, default=32, help="generation_config.json's max_new_tokens")
    g.add_argument("--num-beams", type=int, default=1, help="generation_config.json's num_beams")
    g.add_argument("--no-repeat-ngram-size", type=int, default=0, help="generation_config.json's no_repeat_ngram_size (0: unset)")
    g.add_argument("--readme", help="the model card to write as the checkpoint's README.md (default: a stub)")
    return ap.parse_args(argv)


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


# ----------------------------------------------------------------------------------------------
# Data


def file_digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class PieceEncoder:
    """SentencePiece ids of a text, as locost computes them (include/locost/text/sentencepiece.hpp):
    a text longer than 4096 bytes is encoded part by part, each part ending after the first ASCII
    whitespace byte at or past 4096 bytes that is followed by an ASCII non-space byte. SentencePiece
    sums float scores over its whole input, and on long inputs it picks different segmentations
    among near-ties; the parts keep the sums small (and the ids equal to Hugging Face's tokenizer's).
    Cutting is allowed only when no piece holds the word-boundary mark past its first character (no
    piece spans two words), as locost decides. Parts also make truncation cheap: encoding stops
    once enough ids are out."""

    PART_BYTES = 4096
    SPACE = b" \n\t\r\f\v"

    def __init__(self, spm_path):
        import sentencepiece
        self.sp = sentencepiece.SentencePieceProcessor(model_file=spm_path)
        self.split = all(self.sp.id_to_piece(i).find("\u2581", 1) < 0 for i in range(self.sp.get_piece_size()))

    def encode(self, text, limit=None):
        """ids of text (no eos); with limit, at least the first `limit` of them (maybe more)."""
        data = text.encode("utf-8")
        if not self.split or len(data) <= self.PART_BYTES:
            return self.sp.encode(text)
        ids, begin = [], 0
        while begin < len(data) and (limit is None or len(ids) < limit):
            end = len(data)
            for at in range(begin + self.PART_BYTES, len(data) - 1):
                if data[at] in self.SPACE and data[at + 1] < 0x80 and data[at + 1] not in self.SPACE:
                    end = at + 1
                    break
            ids += self.sp.encode(data[begin:end].decode("utf-8"))
            begin = end
        return ids

    def encode_truncated(self, text, max_tokens, eos=M.EOS_ID):
        """ids cut to max_tokens - 1, then eos (T5's truncation: the eos stays)."""
        return self.encode(text, max_tokens - 1)[:max_tokens - 1] + [eos]


def load_pairs(path, spm_path, max_source, max_target, cache_dir):
    """[(source ids, target ids)] of a JSON-lines file, cached under cache_dir by content."""
    key = hashlib.sha256(("%s|%s|%d|%d" % (file_digest(path), file_digest(spm_path), max_source, max_target)).encode())
    cache = os.path.join(cache_dir, "tokens-%s.pt" % key.hexdigest()[:16])
    if os.path.exists(cache):
        return torch.load(cache)
    enc = PieceEncoder(spm_path)
    sp = enc.sp
    if (sp.pad_id(), sp.eos_id()) != (M.PAD_ID, M.EOS_ID):
        raise SystemExit("%s: pad and eos must be ids 0 and 1 (T5's), not %d and %d" % (spm_path, sp.pad_id(), sp.eos_id()))
    pairs = []
    t0 = time.time()
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            pairs.append((enc.encode_truncated(r["document"], max_source), enc.encode_truncated(r["summary"], max_target)))
    log("tokenized %d pages of %s in %.0f s" % (len(pairs), path, time.time() - t0))
    tmp = cache + ".tmp"
    torch.save(pairs, tmp)
    os.replace(tmp, cache)
    return pairs


def padded_length(n, multiple):
    return -(-n // multiple) * multiple


def pack(indices, pairs, a):
    """Batches (lists of indices) of at most a.batch_tokens padded source tokens, in the given order."""
    batches, cur, longest = [], [], 0
    for i in indices:
        L = padded_length(len(pairs[i][0]), a.pad_to_multiple)
        new_longest = max(longest, L)
        if cur and (new_longest * (len(cur) + 1) > a.batch_tokens or len(cur) >= a.max_batch_rows):
            batches.append(cur)
            cur, new_longest = [], L
        cur.append(i)
        longest = new_longest
    if cur:
        batches.append(cur)
    return batches


def epoch_batches(pairs, a, epoch):
    """The batches of one epoch: a function of (seed, epoch) only."""
    rng = random.Random("%d/%d" % (a.seed, epoch))
    order = list(range(len(pairs)))
    rng.shuffle(order)
    per_pool = max(1, a.pool_batches * max(1, a.batch_tokens // max(1, a.max_source_tokens)))
    batches = []
    for p in range(0, len(order), per_pool):
        pool = sorted(order[p:p + per_pool], key=lambda i: len(pairs[i][0]))
        batches += pack(pool, pairs, a)
    rng.shuffle(batches)
    return batches


def make_tensors(pairs, idx, a, device):
    src = [pairs[i][0] for i in idx]
    tgt = [pairs[i][1] for i in idx]
    ids, mask = M.pad_batch(src)
    L = padded_length(ids.shape[1], a.pad_to_multiple)
    if L > ids.shape[1]:
        ids = torch.nn.functional.pad(ids, (0, L - ids.shape[1]), value=M.PAD_ID)
        mask = torch.nn.functional.pad(mask, (0, L - mask.shape[1]), value=0)
    labels, _ = M.pad_batch(tgt, pad=M.IGNORE_INDEX)
    return ids.to(device), mask.to(device), labels.to(device), int(mask.sum()), sum(len(t) for t in tgt)


def valid_subset(pairs, n):
    """A fixed, spread-out subset of n pages (all when n is 0 or more than there are)."""
    if n <= 0 or n >= len(pairs):
        return list(range(len(pairs)))
    return [round(k * len(pairs) / n) for k in range(n)]


@torch.no_grad()
def evaluate(model, pairs, subset, a, device):
    """Mean cross-entropy per target token over the subset, in eval mode."""
    was_training = model.training
    model.eval()
    order = sorted(subset, key=lambda i: len(pairs[i][0]))
    total, count = 0.0, 0
    for idx in pack(order, pairs, a):
        ids, mask, labels, _, n = make_tensors(pairs, idx, a, device)
        logits = model(ids, mask, M.shift_right(labels))
        total += float(torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                                         ignore_index=M.IGNORE_INDEX, reduction="sum"))
        count += n
    model.train(was_training)
    return total / max(1, count)


# ----------------------------------------------------------------------------------------------
# Model, optimizer, schedule


def build_config(a, vocab):
    d_ff = a.d_ff
    if d_ff is None:
        # a gated feed-forward has 3 matrices: 8/3 x d_model keeps the parameter count of 4 x
        d_ff = int(round(8 * a.d_model / 3 / 64)) * 64 if a.feed_forward_proj.startswith("gated-") else 4 * a.d_model
    sizes = dict(d_model=a.d_model, d_ff=d_ff, num_layers=a.layers, num_decoder_layers=a.decoder_layers,
                 num_heads=a.heads, d_kv=a.d_kv, feed_forward_proj=a.feed_forward_proj, tie_word_embeddings=a.tie,
                 dropout_rate=a.dropout)
    if a.kind == "locost":
        sizes.update(d_state=a.d_state, gating=not a.no_gating)
    return M.make_config(a.kind, vocab, **sizes)


SSM_KERNEL = ("kernel.log_dt", "kernel.inv_A_real", "kernel.A_imag", "kernel.B")


def param_groups(model, a):
    decay, no_decay, ssm = [], [], []
    for name, p in model.named_parameters():
        if name.endswith(SSM_KERNEL):
            ssm.append(p)
        elif p.ndim < 2 or name.endswith(("layer_norm.weight", "layer_prenorm.weight", "ssm_layer.D")):
            no_decay.append(p)
        else:
            decay.append(p)
    groups = [{"params": decay, "weight_decay": a.weight_decay, "lr": a.lr},
              {"params": no_decay, "weight_decay": 0.0, "lr": a.lr}]
    if ssm:
        groups.append({"params": ssm, "weight_decay": 0.0, "lr": min(a.ssm_lr, a.lr)})
    return groups


def lr_factor(a):
    def f(step):  # step: optimizer steps taken so far
        s = step + 1
        if s <= a.warmup:
            return s / max(1, a.warmup)
        if a.schedule == "inverse_sqrt":
            return math.sqrt(max(1, a.warmup) / s)
        return max(0.0, (a.max_steps - s) / max(1, a.max_steps - a.warmup))
    return f


def rng_state():
    s = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        s["cuda"] = torch.cuda.get_rng_state_all()
    return s


def set_rng_state(s):
    torch.set_rng_state(s["torch"])
    random.setstate(s["python"])
    if "cuda" in s and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(s["cuda"])


def atomic_save(obj, path):
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def truncate_csv(path, last_step):
    """Keeps the header and the rows of steps <= last_step (a resumed run rewrites the rest)."""
    if not os.path.exists(path):
        return
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    keep = rows[:1] + [r for r in rows[1:] if r and int(r[0]) <= last_step]
    with open(path + ".tmp", "w", newline="") as f:
        csv.writer(f).writerows(keep)
    os.replace(path + ".tmp", path)


def append_csv(path, header, row):
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(header)
        w.writerow(row)


# ----------------------------------------------------------------------------------------------
# Export


def do_export(a, run_config=None):
    src = os.path.join(a.out, "best.pt")
    if a.export_final or not os.path.exists(src):
        src = os.path.join(a.out, "checkpoint.pt")
    state = torch.load(src, map_location="cpu")
    cfg = state["config"]
    m = M.Seq2Seq(cfg)
    m.load_state_dict(state["model"])
    recipe = state.get("recipe", run_config or {})
    out = a.export or os.path.join(a.out, "model")
    meta = {"trained_by": "locost train/manpages/train.py", "step": state["step"],
            "valid_loss": state.get("valid_loss"), "recipe": json.dumps(recipe, sort_keys=True)}
    readme = open(a.readme, encoding="utf-8").read() if a.readme else None
    extra = {"no_repeat_ngram_size": a.no_repeat_ngram_size} if a.no_repeat_ngram_size else None
    export_mod.export(m, out, recipe.get("spm") or a.spm, a.export_dtype, a.max_new_tokens, a.num_beams, readme=readme,
                      metadata=meta, generation_extra=extra)
    log("exported %s (step %d%s) to %s" % (os.path.basename(src), state["step"],
                                           ", valid loss %.4f" % state["valid_loss"] if state.get("valid_loss") else "", out))
    return out


# ----------------------------------------------------------------------------------------------
# Training


class StopRequest:
    """SIGINT/SIGTERM: finish the current step, save, stop."""

    def __init__(self):
        self.signal = None
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, self.handle)

    def handle(self, signum, frame):
        self.signal = signum


def main(argv=None):
    a = parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(a.threads)
    if a.export_only:
        do_export(a)
        return 0
    recipe = {k: getattr(a, k) for k in RECIPE}
    run_json = os.path.join(a.out, "run.json")
    ckpt_path = os.path.join(a.out, "checkpoint.pt")
    if a.resume:
        if not os.path.exists(ckpt_path):
            raise SystemExit("%s: no checkpoint.pt to resume from" % a.out)
        with open(run_json) as f:
            saved = json.load(f)
        diff = {k: (saved.get(k), recipe[k]) for k in RECIPE if saved.get(k) != recipe[k]}
        if diff:
            raise SystemExit("--resume with another recipe: " + ", ".join("%s %r -> %r" % (k, *v) for k, v in diff.items()))
    elif os.path.exists(ckpt_path):
        raise SystemExit("%s already holds a run: pass --resume, or another --out" % a.out)
    else:
        for name in ("loss.csv", "valid.csv", "best.pt"):
            if os.path.exists(os.path.join(a.out, name)):
                os.remove(os.path.join(a.out, name))
        with open(run_json, "w") as f:
            json.dump(recipe, f, indent=1)
    if not (a.train and a.spm):
        raise SystemExit("--train and --spm are required")

    device = torch.device(a.device)
    import sentencepiece
    vocab = sentencepiece.SentencePieceProcessor(model_file=a.spm).get_piece_size()
    train_pairs = load_pairs(a.train, a.spm, a.max_source_tokens, a.max_target_tokens, a.out)
    valid_pairs = load_pairs(a.valid, a.spm, a.max_source_tokens, a.max_target_tokens, a.out) if a.valid else []
    subset = valid_subset(valid_pairs, a.valid_docs)

    torch.manual_seed(a.seed)
    random.seed(a.seed)
    cfg = build_config(a, vocab)
    model = M.Seq2Seq(cfg, seed=a.seed).to(device)
    opt = torch.optim.AdamW(param_groups(model, a), lr=a.lr, betas=(0.9, a.beta2), eps=1e-8)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(a))
    step, epoch, batch_i, tokens, elapsed, best = 0, 0, 0, 0, 0.0, float("inf")
    if a.resume:
        state = torch.load(ckpt_path, map_location=device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        set_rng_state(state["rng"])
        step, epoch, batch_i, tokens = state["step"], state["epoch"], state["batch"], state["tokens"]
        elapsed, best = state["elapsed"], state["best_valid"]
        truncate_csv(os.path.join(a.out, "loss.csv"), step)
        truncate_csv(os.path.join(a.out, "valid.csv"), step)
        log("resumed at step %d (epoch %d, batch %d, %.0f s trained)" % (step, epoch, batch_i, elapsed))
    else:
        log("%s: %d parameters, config %s" % (a.kind, M.count_parameters(model), json.dumps(cfg)))
        log("%d training pages, %d validation pages (%d evaluated)" % (len(train_pairs), len(valid_pairs), len(subset)))

    def save(valid_loss=None):
        atomic_save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                     "rng": rng_state(), "step": step, "epoch": epoch, "batch": batch_i, "tokens": tokens,
                     "elapsed": elapsed + (time.time() - t_start), "best_valid": best, "config": cfg, "recipe": recipe,
                     "valid_loss": valid_loss}, ckpt_path)

    def validate():
        nonlocal best
        if not subset:
            return None
        v = evaluate(model, valid_pairs, subset, a, device)
        append_csv(os.path.join(a.out, "valid.csv"), ["step", "tokens", "valid_loss", "elapsed_s"],
                   [step, tokens, "%.6f" % v, "%.1f" % (elapsed + time.time() - t_start)])
        log("step %d validation loss %.4f%s" % (step, v, " (best)" if v < best else ""))
        if v < best:
            best = v
            atomic_save({"model": model.state_dict(), "config": cfg, "recipe": recipe, "step": step, "valid_loss": v},
                        os.path.join(a.out, "best.pt"))
        return v

    stop = StopRequest()
    t_start = time.time()
    model.train()
    batches = epoch_batches(train_pairs, a, epoch)
    window_loss, window_steps, window_tokens, window_t = 0.0, 0, 0, time.time()
    steps_here = 0
    why = "max steps"
    while step < a.max_steps:
        if batch_i >= len(batches):
            epoch, batch_i = epoch + 1, 0
            batches = epoch_batches(train_pairs, a, epoch)
        ids, mask, labels, n_src, n_tgt = make_tensors(train_pairs, batches[batch_i], a, device)
        loss = model.loss(ids, mask, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        lr_now = opt.param_groups[0]["lr"]
        opt.step()
        sched.step()
        step, batch_i, steps_here = step + 1, batch_i + 1, steps_here + 1
        tokens += n_src + n_tgt
        lv = float(loss)
        if not math.isfinite(lv):
            raise SystemExit("step %d: loss is %r; stopping (last save: %s)" % (step, lv, ckpt_path))
        append_csv(os.path.join(a.out, "loss.csv"), ["step", "tokens", "target_tokens", "train_loss", "lr", "elapsed_s"],
                   [step, tokens, n_tgt, "%.6f" % lv, "%.6g" % lr_now, "%.1f" % (elapsed + time.time() - t_start)])
        window_loss, window_steps, window_tokens = window_loss + lv, window_steps + 1, window_tokens + n_src + n_tgt
        if step % a.log_every == 0:
            dt = time.time() - window_t
            log("step %d/%d epoch %d batch %d/%d | loss %.4f | lr %.2e | %.0f tokens/s | %.1f min" % (
                step, a.max_steps, epoch, batch_i, len(batches), window_loss / window_steps, lr_now,
                window_tokens / max(dt, 1e-9), (elapsed + time.time() - t_start) / 60))
            window_loss, window_steps, window_tokens, window_t = 0.0, 0, 0, time.time()
        valid_loss = validate() if a.eval_every and step % a.eval_every == 0 else None
        if a.save_every and step % a.save_every == 0:
            save(valid_loss)
        if stop.signal is not None:
            why = "signal %d" % stop.signal
            break
        if a.max_minutes and time.time() - t_start >= 60 * a.max_minutes:
            why = "time limit (%g min)" % a.max_minutes
            break
        if a.stop_after and steps_here >= a.stop_after:
            why = "--stop-after %d" % a.stop_after
            break
    finished = step >= a.max_steps
    valid_loss = None
    if finished and steps_here and (not a.eval_every or step % a.eval_every != 0):
        valid_loss = validate()
    if steps_here:
        save(valid_loss)
    if not finished:
        log("stopped at step %d (%s); saved %s — run the same command with --resume to continue" % (step, why, ckpt_path))
        return 0
    log("finished: %d steps, %d tokens, %.1f min" % (step, tokens, (elapsed + time.time() - t_start) / 60))
    if not a.no_export:
        do_export(a, recipe)
    return 0


if __name__ == "__main__":
    sys.exit(main())
