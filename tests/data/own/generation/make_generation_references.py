#!/usr/bin/python3
"""Reference data for locost's generation code (greedy search, beam search, logits processors
and warpers) with the semantics of Hugging Face transformers 4.27.1 (the version the original
LOCOST code pins), computed by a plain reference implementation written here and driving the
ORIGINAL LOCOST model (flbbb/locost-summarization @ 29f7947b) step by step.

How to run (from the repository root):
    bash /work/shared/tools/original/setup.sh MIRROR_ROOT /tmp/ref   # clones the originals once
    /usr/bin/python3 tests/data/own/generation/make_generation_references.py
Options: --shared DIR (default /work/shared: tools/original with the transformers 4.27.1
stand-in and tools/st_io.py), --ref-root DIR (default /tmp/ref, the original clones),
--check-only (run every check, write nothing).

Needs Debian's /usr/bin/python3 with python3-torch (1.13) and python3-numpy.  transformers is
NOT needed: the processors, warpers, greedy search and beam search below are an independent
implementation of the rules read from transformers v4.27.1 (src/transformers/generation/
logits_process.py, beam_search.py, utils.py); README.md next to this file states every rule.
The model is the original `models.LOCOSTForConditionalGeneration`, built from
tests/data/reference/tiny_locost/{config.json,config_tied.json,model.safetensors}, run with
use_fast_fft_conv=False and LOCOST_VAND_PRECISION=float64, decoded one token at a time with
the original KV cache (`past_key_values`); beams reorder that cache with the original
`_reorder_cache` (index_select on the batch dimension), as HF beam_search does.

Order of work:
  1. Faithfulness: this script's greedy loop must reproduce `greedy.sequence` of
     tests/data/reference/locost_decoder.safetensors exactly (abort otherwise), and the tied
     model must reproduce `dec.tied.logits`.
  2. Processor cases (pure functions, random float32 scores with deliberate ties).
  3. Greedy and beam-search end-to-end cases.  Encoder inputs are drawn from fixed seeds; for
     each case the first seed (in a fixed list) whose run has the wanted property (e.g. "some
     beam finishes on eos") and whose every decision has a margin >= MIN_MARGIN is kept.
  4. Cross-checks: float32 arithmetic of the processors against torch ops; top-p decisions far
     from the threshold and independent of the order of equal scores (except one flagged case);
     every greedy / beam case rerun without the KV cache (same result); batch rows == the
     documents decoded alone; every beam score == a teacher-forced recomputation.
  5. Writes generation.json + generation.safetensors (+ a size check: folder < 2 MB).

Deterministic: fixed seeds, one thread, no wall-clock dependent choices.
"""
import argparse
import json
import math
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_DATA = os.path.normpath(os.path.join(HERE, "..", ".."))  # tests/data
TINY_DIR = os.path.join(REPO_DATA, "reference", "tiny_locost")
DEC_REF = os.path.join(REPO_DATA, "reference", "locost_decoder.safetensors")

VOCAB = 512
PAD = 0
EOS = 1
START = 0
MIN_MARGIN = 1e-4  # every argmax / ordering / threshold decision of a kept case is at least this far from a tie
NEG_INF = float("-inf")

np = None  # numpy, imported in main() after the environment is set
torch = None


# --------------------------------------------------------------------------------------------
# Logits processors and warpers (numpy, float32).  Each takes input_ids (N x cur_len, int64)
# and scores (N x V, float32) and returns NEW scores (the input is not modified).
# --------------------------------------------------------------------------------------------
def _f32(x):
    return np.float32(x)


def proc_min_length(ids, scores, min_length, eos_token_id):
    out = scores.copy()
    if ids.shape[1] < min_length:
        out[:, eos_token_id] = NEG_INF
    return out


def proc_min_new_tokens(ids, scores, prompt_length_to_skip, min_new_tokens, eos_token_id):
    out = scores.copy()
    if ids.shape[1] - prompt_length_to_skip < min_new_tokens:
        out[:, eos_token_id] = NEG_INF
    return out


def proc_repetition_penalty(ids, scores, penalty):
    out = scores.copy()
    pen = _f32(penalty)
    for r in range(ids.shape[0]):
        toks = np.unique(ids[r])
        v = scores[r, toks]
        out[r, toks] = np.where(v < 0, v * pen, v / pen).astype(np.float32)
    return out


def ngram_bans(row, n):
    """Tokens t such that (last n-1 tokens of row) + (t,) already occurs in row."""
    L = len(row)
    if L + 1 < n:
        return []
    prefix = tuple(row[L - n + 1:]) if n > 1 else ()
    bans = []
    for i in range(L - n + 1):
        if tuple(row[i:i + n - 1]) == prefix:
            bans.append(row[i + n - 1])
    return bans


def proc_no_repeat_ngram(ids, scores, ngram_size):
    out = scores.copy()
    for r in range(ids.shape[0]):
        b = ngram_bans([int(t) for t in ids[r]], ngram_size)
        if b:
            out[r, b] = NEG_INF
    return out


def encoder_ngram_table(enc_row, n):
    table = {}
    for i in range(len(enc_row) - n + 1):
        table.setdefault(tuple(enc_row[i:i + n - 1]), []).append(enc_row[i + n - 1])
    return table


def proc_encoder_no_repeat_ngram(ids, scores, encoder_ngram_size, encoder_input_ids):
    """Decoder row r belongs to encoder row r // (N / encoder_batch); the encoder rows are taken
    whole, padding included (HF passes the padded input_ids tensor)."""
    n = encoder_ngram_size
    enc = [[int(t) for t in row] for row in encoder_input_ids]
    per = ids.shape[0] // len(enc)
    out = scores.copy()
    for r in range(ids.shape[0]):
        row = [int(t) for t in ids[r]]
        L = len(row)
        if L < n - 1:
            continue  # the last n-1 decoder tokens do not exist yet: nothing can match
        prefix = tuple(row[L - n + 1:]) if n > 1 else ()
        b = encoder_ngram_table(enc[r // per], n).get(prefix, [])
        if b:
            out[r, b] = NEG_INF
    return out


def proc_no_bad_words(ids, scores, bad_words_ids, eos_token_id):
    words = [list(w) for w in bad_words_ids if list(w) != [eos_token_id]]
    out = scores.copy()
    singles = [w[0] for w in words if len(w) == 1]
    if singles:
        out[:, singles] = NEG_INF
    for r in range(ids.shape[0]):
        row = [int(t) for t in ids[r]]
        for w in words:
            if len(w) < 2:
                continue
            pre = w[:-1]
            if len(pre) <= len(row) and row[len(row) - len(pre):] == pre:
                out[r, w[-1]] = NEG_INF
    return out


def proc_forced_bos(ids, scores, bos_token_id):
    out = scores.copy()
    if ids.shape[1] == 1:
        out[:, :] = NEG_INF
        out[:, bos_token_id] = 0.0
    return out


def proc_forced_eos(ids, scores, max_length, eos_token_id):
    out = scores.copy()
    if ids.shape[1] == max_length - 1:
        out[:, :] = NEG_INF
        out[:, eos_token_id] = 0.0
    return out


def warp_temperature(ids, scores, temperature):
    return (scores / _f32(temperature)).astype(np.float32)


def warp_top_k(ids, scores, top_k, min_tokens_to_keep=1):
    k = min(max(top_k, min_tokens_to_keep), scores.shape[1])
    out = scores.copy()
    for r in range(scores.shape[0]):
        thr = np.sort(scores[r])[::-1][k - 1]
        out[r, scores[r] < thr] = NEG_INF
    return out


def softmax_f32(x):
    m = x.max()
    e = np.exp((x - m).astype(np.float32)).astype(np.float32)
    return (e / e.sum(dtype=np.float32)).astype(np.float32)


def top_p_remove_mask(row, top_p, min_tokens_to_keep, reverse_ties=False):
    """Boolean mask over the vocabulary.  Ascending STABLE sort (equal scores: lower token id
    first, i.e. removed first), float32 softmax of the sorted scores, float32 running sum;
    remove where cumsum <= float32(1 - top_p); the last min_tokens_to_keep sorted positions
    are kept when min_tokens_to_keep > 1."""
    if reverse_ties:  # equal scores: HIGHER token id first (only used to test tie independence)
        order = (len(row) - 1 - np.argsort(row[::-1], kind="stable"))
    else:
        order = np.argsort(row, kind="stable")
    p = softmax_f32(row[order])
    cum = np.cumsum(p, dtype=np.float32)
    rem = cum <= _f32(1.0 - top_p)
    if min_tokens_to_keep > 1:
        rem[-min_tokens_to_keep:] = False
    mask = np.zeros(row.shape[0], dtype=bool)
    mask[order] = rem
    return mask, order, cum


def warp_top_p(ids, scores, top_p, min_tokens_to_keep=1):
    out = scores.copy()
    for r in range(scores.shape[0]):
        mask, _, _ = top_p_remove_mask(scores[r], top_p, min_tokens_to_keep)
        out[r, mask] = NEG_INF
    return out


# HF 4.27.1 `_get_logits_processor` order (the subset locost supports), then the warpers
# of `_get_logits_warper` (sampling only).  Each entry: (class name, generate kwarg(s), fn).
def build_processors(opt, encoder_input_ids, max_length, input_len=1):
    P = []
    if opt.get("repetition_penalty") is not None and opt["repetition_penalty"] != 1.0:
        P.append(("RepetitionPenaltyLogitsProcessor",
                  lambda i, s, p=opt["repetition_penalty"]: proc_repetition_penalty(i, s, p)))
    if opt.get("no_repeat_ngram_size") and opt["no_repeat_ngram_size"] > 0:
        P.append(("NoRepeatNGramLogitsProcessor",
                  lambda i, s, n=opt["no_repeat_ngram_size"]: proc_no_repeat_ngram(i, s, n)))
    if opt.get("encoder_no_repeat_ngram_size") and opt["encoder_no_repeat_ngram_size"] > 0:
        P.append(("EncoderNoRepeatNGramLogitsProcessor",
                  lambda i, s, n=opt["encoder_no_repeat_ngram_size"]: proc_encoder_no_repeat_ngram(
                      i, s, n, encoder_input_ids)))
    if opt.get("bad_words_ids") is not None:
        P.append(("NoBadWordsLogitsProcessor",
                  lambda i, s, w=opt["bad_words_ids"]: proc_no_bad_words(i, s, w, EOS)))
    if opt.get("min_length") and opt["min_length"] > 0:
        P.append(("MinLengthLogitsProcessor", lambda i, s, m=opt["min_length"]: proc_min_length(i, s, m, EOS)))
    if opt.get("min_new_tokens") and opt["min_new_tokens"] > 0:
        P.append(("MinNewTokensLengthLogitsProcessor",
                  lambda i, s, m=opt["min_new_tokens"]: proc_min_new_tokens(i, s, input_len, m, EOS)))
    if opt.get("forced_bos_token_id") is not None:
        P.append(("ForcedBOSTokenLogitsProcessor",
                  lambda i, s, b=opt["forced_bos_token_id"]: proc_forced_bos(i, s, b)))
    if opt.get("forced_eos_token_id") is not None:
        P.append(("ForcedEOSTokenLogitsProcessor",
                  lambda i, s, e=opt["forced_eos_token_id"]: proc_forced_eos(i, s, max_length, e)))
    return P


def build_warpers(opt):
    W = []
    keep = 2 if opt.get("num_beams", 1) > 1 else 1
    if opt.get("temperature") is not None and opt["temperature"] != 1.0:
        W.append(("TemperatureLogitsWarper", lambda i, s, t=opt["temperature"]: warp_temperature(i, s, t)))
    top_k = opt.get("top_k", 50)  # GenerationConfig default top_k = 50
    if top_k is not None and top_k != 0:
        W.append(("TopKLogitsWarper", lambda i, s, k=top_k: warp_top_k(i, s, k, keep)))
    if opt.get("top_p") is not None and opt["top_p"] < 1.0:
        W.append(("TopPLogitsWarper", lambda i, s, p=opt["top_p"]: warp_top_p(i, s, p, keep)))
    return W


def apply_list(plist, ids, scores):
    for _, fn in plist:
        scores = fn(ids, scores)
    return scores


# --------------------------------------------------------------------------------------------
# The original model, stepped with its KV cache
# --------------------------------------------------------------------------------------------
class Runner:
    def __init__(self, model, enc_ids, enc_mask, expand=1, use_cache=True):
        from transformers.modeling_outputs import BaseModelOutput

        self.model = model
        ids = torch.tensor(enc_ids, dtype=torch.long)
        mask = torch.tensor(enc_mask, dtype=torch.long)
        with torch.no_grad():
            hid = model.encoder(input_ids=ids, attention_mask=mask, return_dict=True).last_hidden_state
        # HF `_expand_inputs_for_generation`: repeat_interleave along the batch
        self.enc = BaseModelOutput(last_hidden_state=hid.repeat_interleave(expand, dim=0))
        self.mask = mask.repeat_interleave(expand, dim=0)
        self.past = None
        self.use_cache = use_cache

    def step(self, seqs):
        """seqs: numpy (N, cur_len).  Returns float32 numpy logits (N, V) for the next token."""
        s = torch.tensor(seqs, dtype=torch.long)
        with torch.no_grad():
            if self.use_cache:
                o = self.model(encoder_outputs=self.enc, attention_mask=self.mask,
                               decoder_input_ids=s[:, -1:] if self.past is not None else s,
                               past_key_values=self.past, use_cache=True, return_dict=True)
                self.past = o.past_key_values
            else:
                o = self.model(encoder_outputs=self.enc, attention_mask=self.mask, decoder_input_ids=s,
                               use_cache=False, return_dict=True)
        return o.logits[:, -1, :].float().numpy().copy()

    def reorder(self, idx):
        if self.past is not None:
            self.past = self.model._reorder_cache(self.past, torch.tensor(idx, dtype=torch.long))


def log_softmax_f32(logits):
    return torch.nn.functional.log_softmax(torch.from_numpy(logits), dim=-1).numpy().copy()


# --------------------------------------------------------------------------------------------
# Greedy search (HF 4.27.1 greedy_search as called by generate)
# --------------------------------------------------------------------------------------------
def greedy(model, enc_ids, enc_mask, opt, use_cache=True):
    B = len(enc_ids)
    max_length = opt["max_new_tokens"] + 1
    procs = build_processors(opt, enc_ids, max_length)
    run = Runner(model, enc_ids, enc_mask, 1, use_cache)
    seqs = np.full((B, 1), START, dtype=np.int64)
    unfinished = np.ones(B, dtype=bool)
    min_gap = math.inf
    step_logits = []
    while True:
        logits = run.step(seqs)
        step_logits.append(logits)
        sc = apply_list(procs, seqs, logits)
        nxt = np.argmax(sc, axis=1)  # first maximum
        for r in range(B):
            if unfinished[r]:
                srt = np.sort(sc[r])[::-1]
                if np.isfinite(srt[1]):
                    min_gap = min(min_gap, float(srt[0]) - float(srt[1]))
        nxt = np.where(unfinished, nxt, PAD)
        seqs = np.concatenate([seqs, nxt[:, None]], axis=1)
        unfinished &= nxt != EOS
        if not unfinished.any() or seqs.shape[1] >= max_length:
            break
    return {"sequences": seqs, "min_margin": min_gap, "processors": [p[0] for p in procs],
            "step_logits": step_logits}


# --------------------------------------------------------------------------------------------
# Beam search (HF 4.27.1 BeamSearchScorer + BeamHypotheses + GenerationMixin.beam_search)
# --------------------------------------------------------------------------------------------
class Hyps:
    """The n-best list of finished hypotheses of one batch row (BeamHypotheses)."""

    def __init__(self, K, lp, es, max_length, margins):
        self.K, self.lp, self.es, self.max_length = K, lp, es, max_length
        self.beams = []  # (score, tokens)
        self.worst = 1e9
        self.margins = margins
        self.n_added = 0

    def add(self, tokens, sum_logprobs, eos):
        score = sum_logprobs / (len(tokens) ** self.lp)
        if len(self.beams) >= self.K:
            self.margins.append(("hyp_add", abs(score - self.worst)))
        if len(self.beams) < self.K or score > self.worst:
            self.n_added += 1
            self.beams.append((score, list(tokens), eos))
            if len(self.beams) > self.K:
                srt = sorted([(s, i) for i, (s, _, _) in enumerate(self.beams)])
                del self.beams[srt[0][1]]
                self.worst = srt[1][0]
            else:
                self.worst = min(score, self.worst)

    def highest_attainable(self, best_sum_logprobs, cur_len):
        if self.es is False:
            return best_sum_logprobs / cur_len ** self.lp
        # "never"
        if self.lp > 0.0:
            return best_sum_logprobs / self.max_length ** self.lp
        return best_sum_logprobs / cur_len ** self.lp

    def is_done(self, best_sum_logprobs, cur_len):
        if len(self.beams) < self.K:
            return False
        if self.es is True:
            return True
        h = self.highest_attainable(best_sum_logprobs, cur_len)
        self.margins.append(("is_done", abs(self.worst - h)))
        return self.worst >= h


def beam_search(model, enc_ids, enc_mask, opt, use_cache=True, cur_len_quirk=True):
    """Returns dict with sequences (B*nrs, T), sequence_scores (float32), hyps, margins..."""
    B = len(enc_ids)
    K = opt["num_beams"]
    V = VOCAB
    lp = float(opt.get("length_penalty", 1.0))
    es = opt.get("early_stopping", False)
    nrs = opt.get("num_return_sequences", 1)
    max_length = opt["max_new_tokens"] + 1
    procs = build_processors(opt, enc_ids, max_length)
    margins = []
    hyps = [Hyps(K, lp, es, max_length, margins) for _ in range(B)]
    done = [False] * B
    run = Runner(model, enc_ids, enc_mask, K, use_cache)
    seqs = np.full((B * K, 1), START, dtype=np.int64)
    beam_scores = np.zeros((B, K), dtype=np.float32)
    beam_scores[:, 1:] = -1e9
    beam_scores = beam_scores.reshape(-1)
    n_eos_candidates = 0
    n_eos_hyps = [0] * B
    while True:
        cur_len = seqs.shape[1]
        logp = log_softmax_f32(run.step(seqs))
        proc = apply_list(procs, seqs, logp)
        total = (proc + beam_scores[:, None]).astype(np.float32).reshape(B, K * V)
        nb_scores = np.zeros((B, K), dtype=np.float32)
        nb_tokens = np.zeros((B, K), dtype=np.int64)
        nb_index = np.zeros((B, K), dtype=np.int64)
        counter = cur_len
        for b in range(B):
            if done[b]:
                nb_tokens[b, :] = PAD  # scores 0, source index 0 (global), as HF
                continue
            # top 2K, descending; equal scores: lower flat index (beam * V + token) first
            order = np.argsort(-total[b], kind="stable")[: 2 * K + 1]
            cand = total[b, order]
            fill = 0
            used = 0
            for rank in range(2 * K):
                flat = int(order[rank])
                sc = cand[rank]
                beam, tok = flat // V, flat % V
                gb = b * K + beam
                used = rank + 1
                if tok == EOS:
                    n_eos_candidates += 1
                    if rank >= K:
                        continue
                    n_eos_hyps[b] += 1
                    hyps[b].add([int(t) for t in seqs[gb]], float(sc), True)
                else:
                    nb_scores[b, fill] = sc
                    nb_tokens[b, fill] = tok
                    nb_index[b, fill] = gb
                    fill += 1
                if fill == K:
                    break
            if fill < K:
                raise RuntimeError("more than K eos candidates in the top 2K")
            for i in range(min(used, 2 * K)):
                a, c = float(cand[i]), float(cand[i + 1])
                if math.isfinite(a) and math.isfinite(c):
                    margins.append(("topk_order", a - c))
            counter = counter + 1 if cur_len_quirk else cur_len + 1
            done[b] = done[b] or hyps[b].is_done(float(cand[0]), counter)
        idx = nb_index.reshape(-1)
        seqs = np.concatenate([seqs[idx], nb_tokens.reshape(-1, 1)], axis=1)
        run.reorder(idx)
        beam_scores = nb_scores.reshape(-1)
        if all(done) or seqs.shape[1] >= max_length:
            break
    # finalize
    for b in range(B):
        if done[b]:
            continue
        for k in range(K):
            hyps[b].add([int(t) for t in seqs[b * K + k]], float(beam_scores[b * K + k]), False)
    best, best_scores = [], []
    for b in range(B):
        srt = sorted(hyps[b].beams, key=lambda x: x[0])
        desc = srt[::-1]
        for j in range(min(nrs, len(desc) - 1)):
            margins.append(("final_order", desc[j][0] - desc[j + 1][0]))
        for j in range(nrs):
            s, t, _ = srt.pop()
            best.append(t)
            best_scores.append(s)
    lens = [len(t) for t in best]
    width = min(max(lens) + 1, max_length)
    out = np.full((len(best), width), PAD, dtype=np.int64)
    for i, t in enumerate(best):
        out[i, : len(t)] = t
        if len(t) < width:
            out[i, len(t)] = EOS
    return {
        "sequences": out,
        "sequence_scores": np.array(best_scores, dtype=np.float32),
        "sequence_scores_f64": best_scores,
        "hyps": [sorted(h.beams, key=lambda x: -x[0]) for h in hyps],
        "margins": margins,
        "min_margin": min([m for _, m in margins] + [math.inf]),
        "stopped_at_length": int(seqs.shape[1]),
        "stopped_by": "all_done" if all(done) else "max_length",
        "done": list(done),
        "n_eos_candidates": n_eos_candidates,
        "n_eos_hyps": n_eos_hyps,
        "processors": [p[0] for p in procs],
    }


# --------------------------------------------------------------------------------------------
# Setup
# --------------------------------------------------------------------------------------------
def setup(shared, ref_root):
    global np, torch
    os.environ["LOCOST_VAND_PRECISION"] = "float64"
    os.environ["REF_ROOT"] = ref_root
    sys.path.insert(0, os.path.join(shared, "tools", "original"))
    sys.path.insert(0, os.path.join(shared, "tools"))
    import numpy as _np
    import torch as _torch

    np, torch = _np, _torch
    torch.set_num_threads(1)
    import common  # noqa: F401  (wires the shim and the original clones)


def load_st(path):
    import st_io

    return st_io.load_file(path)


def build_model(tied):
    import common
    from models import LOCOSTForConditionalGeneration

    cfg_file = os.path.join(TINY_DIR, "config_tied.json" if tied else "config.json")
    with open(cfg_file) as f:
        cj = json.load(f)
    assert cj["tie_word_embeddings"] is tied and cj["vocab_size"] == VOCAB
    assert cj["eos_token_id"] == EOS and cj["pad_token_id"] == PAD and cj["decoder_start_token_id"] == START
    cfg = common.locost_config(tie_word_embeddings=tied, use_fast_fft_conv=False)
    for k in ("d_model", "d_state", "d_ff", "num_layers", "num_decoder_layers", "num_heads", "d_kv"):
        assert getattr(cfg, k) == cj[k], k
    torch.manual_seed(0)
    m = LOCOSTForConditionalGeneration(cfg).eval()
    sd, _ = load_st(os.path.join(TINY_DIR, "model.safetensors"))
    sd = {k: torch.from_numpy(v) for k, v in sd.items()}
    if tied:
        sd.pop("lm_head.weight")  # the tied head IS shared.weight; loading lm_head would overwrite it
        r = m.load_state_dict(sd, strict=False)
        assert list(r.missing_keys) == ["lm_head.weight"] and not r.unexpected_keys, r
        assert m.lm_head.weight.data_ptr() == m.shared.weight.data_ptr()
    else:
        m.load_state_dict(sd, strict=True)
    return m


def enc_doc(seed):
    """Encoder input of one document: numpy RandomState(seed); length L = randint(4, 161)
    (4..160), then L token ids uniform in [2, 512) (never pad 0 nor eos 1)."""
    g = np.random.RandomState(seed)
    L = int(g.randint(4, 161))
    return [int(t) for t in g.randint(2, VOCAB, size=L)]


def enc_batch(seeds):
    """Right-padded batch (pad id 0) and its attention mask."""
    docs = [enc_doc(s) for s in seeds]
    T = max(len(d) for d in docs)
    ids = [d + [PAD] * (T - len(d)) for d in docs]
    mask = [[1] * len(d) + [0] * (T - len(d)) for d in docs]
    return ids, mask


# --------------------------------------------------------------------------------------------
# Processor cases
# --------------------------------------------------------------------------------------------
PROC_FN = {
    "MinLengthLogitsProcessor": proc_min_length,
    "MinNewTokensLengthLogitsProcessor": proc_min_new_tokens,
    "RepetitionPenaltyLogitsProcessor": proc_repetition_penalty,
    "NoRepeatNGramLogitsProcessor": proc_no_repeat_ngram,
    "EncoderNoRepeatNGramLogitsProcessor": proc_encoder_no_repeat_ngram,
    "NoBadWordsLogitsProcessor": proc_no_bad_words,
    "ForcedBOSTokenLogitsProcessor": proc_forced_bos,
    "ForcedEOSTokenLogitsProcessor": proc_forced_eos,
    "TemperatureLogitsWarper": warp_temperature,
    "TopKLogitsWarper": warp_top_k,
    "TopPLogitsWarper": warp_top_p,
}
# generate() keyword that creates each class (constructor argument -> generate kwarg)
GEN_KWARG = {
    "MinLengthLogitsProcessor": {"min_length": "min_length", "eos_token_id": "eos_token_id"},
    "MinNewTokensLengthLogitsProcessor": {"min_new_tokens": "min_new_tokens", "eos_token_id": "eos_token_id",
                                          "prompt_length_to_skip": "(decoder input length, 1 for generate)"},
    "RepetitionPenaltyLogitsProcessor": {"penalty": "repetition_penalty"},
    "NoRepeatNGramLogitsProcessor": {"ngram_size": "no_repeat_ngram_size"},
    "EncoderNoRepeatNGramLogitsProcessor": {"encoder_ngram_size": "encoder_no_repeat_ngram_size",
                                            "encoder_input_ids": "(the encoder input_ids, padded)"},
    "NoBadWordsLogitsProcessor": {"bad_words_ids": "bad_words_ids", "eos_token_id": "eos_token_id"},
    "ForcedBOSTokenLogitsProcessor": {"bos_token_id": "forced_bos_token_id"},
    "ForcedEOSTokenLogitsProcessor": {"max_length": "max_length (= max_new_tokens + 1)",
                                      "eos_token_id": "forced_eos_token_id"},
    "TemperatureLogitsWarper": {"temperature": "temperature"},
    "TopKLogitsWarper": {"top_k": "top_k", "min_tokens_to_keep": "(2 if num_beams > 1 else 1)"},
    "TopPLogitsWarper": {"top_p": "top_p", "min_tokens_to_keep": "(2 if num_beams > 1 else 1)"},
}


def rand_scores(seed, n, ties=True):
    g = np.random.RandomState(seed)
    s = (g.standard_normal((n, VOCAB)) * 2.0).astype(np.float32)
    if ties:
        for r in range(n):  # a few groups of exactly equal scores (one of them high)
            for grp, val in ((g.choice(VOCAB, 3, replace=False), s[r].max() - 0.25),
                             (g.choice(VOCAB, 4, replace=False), np.float32(0.5)),
                             (g.choice(VOCAB, 2, replace=False), np.float32(-1.75))):
                s[r, grp] = val
    return s


def rand_ids(seed, n, cur_len, hi=VOCAB):
    g = np.random.RandomState(seed)
    ids = g.randint(2, hi, size=(n, cur_len)).astype(np.int64)
    ids[:, 0] = START
    return ids


def processor_cases():
    C = []

    def add(name, cls, params, ids, scores, note=""):
        ids = np.asarray(ids, dtype=np.int64)
        if isinstance(scores, int):
            scores = rand_scores(scores, ids.shape[0])
        C.append({"name": name, "class": cls, "params": params, "input_ids": ids, "scores": scores, "note": note})

    # MinLength (eos 1): masked while cur_len < min_length
    add("min_length.cur_len_eq_min_minus_1", "MinLengthLogitsProcessor", {"min_length": 5, "eos_token_id": EOS},
        rand_ids(11, 2, 4), 101, "cur_len 4 == min_length - 1: eos masked")
    add("min_length.cur_len_eq_min", "MinLengthLogitsProcessor", {"min_length": 5, "eos_token_id": EOS},
        rand_ids(12, 2, 5), 102, "cur_len == min_length: unchanged")
    add("min_length.cur_len_1", "MinLengthLogitsProcessor", {"min_length": 5, "eos_token_id": EOS},
        rand_ids(13, 3, 1), 103, "only the start token: eos masked")
    # MinNewTokens (prompt_length_to_skip 1 = the decoder start token)
    add("min_new_tokens.new_2_of_3", "MinNewTokensLengthLogitsProcessor",
        {"prompt_length_to_skip": 1, "min_new_tokens": 3, "eos_token_id": EOS}, rand_ids(14, 2, 3), 104,
        "cur_len 3 -> 2 new tokens < 3: eos masked")
    add("min_new_tokens.new_3_of_3", "MinNewTokensLengthLogitsProcessor",
        {"prompt_length_to_skip": 1, "min_new_tokens": 3, "eos_token_id": EOS}, rand_ids(15, 2, 4), 105,
        "cur_len 4 -> 3 new tokens: unchanged")
    add("min_new_tokens.new_0", "MinNewTokensLengthLogitsProcessor",
        {"prompt_length_to_skip": 1, "min_new_tokens": 6, "eos_token_id": EOS}, rand_ids(16, 3, 1), 106,
        "no new token yet: eos masked")
    # RepetitionPenalty: gathers every token of input_ids (start token 0 included, duplicates once)
    ids = [[0, 7, 9, 7, 300, 9], [0, 0, 5, 6, 5, 1], [0, 12, 13, 14, 15, 12]]
    sc = rand_scores(107, 3)
    sc[0, 7] = 0.0  # exactly 0 -> 0 / penalty
    sc[0, 9] = -3.0
    sc[1, 5] = 2.5
    sc[2, 12] = float("-inf")
    add("repetition_penalty.1_5", "RepetitionPenaltyLogitsProcessor", {"penalty": 1.5}, ids, sc,
        "score < 0 -> score * penalty, else score / penalty; 0 stays 0; -inf stays -inf; token 0 (start) penalized")
    add("repetition_penalty.0_7", "RepetitionPenaltyLogitsProcessor", {"penalty": 0.7}, ids, sc.copy(),
        "penalty < 1 rewards repeated tokens")
    add("repetition_penalty.cur_len_1", "RepetitionPenaltyLogitsProcessor", {"penalty": 1.3},
        [[0], [0]], 108, "only the start token 0 is penalized")
    # NoRepeatNGram
    add("no_repeat_ngram.2", "NoRepeatNGramLogitsProcessor", {"ngram_size": 2},
        [[0, 5, 6, 5, 9, 5, 6, 5], [0, 7, 7, 7, 3, 4, 2, 7], [0, 3, 4, 9, 3, 4, 8, 3]], 109,
        "row0: after 5 ban {6, 9}; row1: after 7 ban {7, 3}; row2: after 3 ban {4}")
    add("no_repeat_ngram.2.no_repeat", "NoRepeatNGramLogitsProcessor", {"ngram_size": 2},
        [[0, 5, 6, 7, 8], [0, 9, 10, 11, 12]], 110, "last token never seen before: nothing banned")
    add("no_repeat_ngram.3", "NoRepeatNGramLogitsProcessor", {"ngram_size": 3},
        [[0, 5, 6, 8, 5, 6], [0, 0, 0, 4, 0, 0], [0, 2, 3, 2, 3, 2]], 111,
        "row0: (5,6) -> ban 8; row1: (0,0) -> ban {0, 4}; row2: (3,2) -> ban 3")
    add("no_repeat_ngram.3.cur_len_1", "NoRepeatNGramLogitsProcessor", {"ngram_size": 3}, [[0], [0]], 112,
        "cur_len + 1 < n: nothing banned")
    add("no_repeat_ngram.3.cur_len_2", "NoRepeatNGramLogitsProcessor", {"ngram_size": 3}, [[0, 0], [0, 5]], 113,
        "cur_len + 1 == n but no complete 3-gram yet: nothing banned")
    add("no_repeat_ngram.3.cur_len_3", "NoRepeatNGramLogitsProcessor", {"ngram_size": 3}, [[0, 0, 0], [0, 5, 0]],
        114, "row0: 3-gram (0,0,0) exists and the last two tokens are (0,0): ban 0; row1: nothing")
    add("no_repeat_ngram.1", "NoRepeatNGramLogitsProcessor", {"ngram_size": 1}, [[0, 5, 9, 5], [0, 3, 3, 3]], 115,
        "n = 1: every token already in the row (start token 0 included) is banned")
    # EncoderNoRepeatNGram (the padded encoder ids are used whole, padding included)
    enc = [[20, 21, 22, 20, 23, 24, 25, 26], [30, 31, 32, 33, 31, 34, 0, 0]]
    add("encoder_no_repeat_ngram.2", "EncoderNoRepeatNGramLogitsProcessor",
        {"encoder_ngram_size": 2, "encoder_input_ids": enc}, [[0, 5, 20], [0, 7, 31]], 116,
        "row0 -> encoder row 0: after 20 ban {21, 23}; row1 -> encoder row 1: after 31 ban {32, 34}")
    add("encoder_no_repeat_ngram.2.pad_bigram", "EncoderNoRepeatNGramLogitsProcessor",
        {"encoder_ngram_size": 2, "encoder_input_ids": enc}, [[0], [0]], 117,
        "cur_len 1, last token = start 0: encoder row 1 contains the pad bigrams (34,0),(0,0): ban 0 in row 1 only")
    add("encoder_no_repeat_ngram.3.beams", "EncoderNoRepeatNGramLogitsProcessor",
        {"encoder_ngram_size": 3, "encoder_input_ids": enc},
        [[0, 20, 23], [0, 22, 20], [0, 31, 32], [0, 33, 31]], 118,
        "4 hypotheses for 2 encoder rows (num_beams 2: row r uses encoder row r // 2); "
        "row0: (20,23)->24; row1: (22,20)->23; row2: (31,32)->33; row3: (33,31)->34")
    add("encoder_no_repeat_ngram.3.cur_len_1", "EncoderNoRepeatNGramLogitsProcessor",
        {"encoder_ngram_size": 3, "encoder_input_ids": enc}, [[0], [0]], 119,
        "cur_len < n - 1: nothing banned (even though encoder row 1 has (0,0) pairs)")
    # NoBadWords
    add("bad_words.single", "NoBadWordsLogitsProcessor", {"bad_words_ids": [[5], [17], [1]], "eos_token_id": EOS},
        rand_ids(20, 2, 3), 120, "5 and 17 always masked; [eos] is dropped from the list (eos NOT masked)")
    add("bad_words.multi", "NoBadWordsLogitsProcessor",
        {"bad_words_ids": [[3, 4], [7, 8, 9], [2, 1], [11, 12, 13, 14]], "eos_token_id": EOS},
        [[0, 6, 3], [0, 7, 8], [0, 5, 8], [0, 9, 2], [0, 12, 13]], 121,
        "row0 ends with 3 -> ban 4; row1 ends with (7,8) -> ban 9; row2 ends with 8 only -> nothing; "
        "row3 ends with 2 -> ban eos 1 (a multi-token word ending in eos is kept); row4: prefix (11,12,13) "
        "not matched -> nothing")
    add("bad_words.short_rows", "NoBadWordsLogitsProcessor",
        {"bad_words_ids": [[250], [0, 3], [40, 41, 42]], "eos_token_id": EOS}, [[0], [0]], 122,
        "rows = start token 0 only: (0,3) bans 3; the prefix (40,41) is longer than the row: no ban; 250 always")
    add("bad_words.prefix_partial", "NoBadWordsLogitsProcessor",
        {"bad_words_ids": [[40, 41, 42], [0, 3]], "eos_token_id": EOS}, [[0, 41], [40, 41]], 141,
        "row0 ends (0,41) != (40,41): nothing; row1 = (40,41): ban 42 (the start token need not precede)")
    # ForcedBOS / ForcedEOS
    add("forced_bos.cur_len_1", "ForcedBOSTokenLogitsProcessor", {"bos_token_id": 3}, [[0], [0]], 123,
        "cur_len 1: every token -inf except bos = 0")
    add("forced_bos.cur_len_2", "ForcedBOSTokenLogitsProcessor", {"bos_token_id": 3}, [[0, 3], [0, 9]], 124,
        "cur_len 2: unchanged")
    add("forced_eos.cur_len_max_minus_1", "ForcedEOSTokenLogitsProcessor", {"max_length": 6, "eos_token_id": EOS},
        rand_ids(25, 2, 5), 125, "cur_len == max_length - 1: every token -inf except eos = 0")
    add("forced_eos.cur_len_max_minus_2", "ForcedEOSTokenLogitsProcessor", {"max_length": 6, "eos_token_id": EOS},
        rand_ids(26, 2, 4), 126, "unchanged")
    add("forced_eos.cur_len_max", "ForcedEOSTokenLogitsProcessor", {"max_length": 6, "eos_token_id": EOS},
        rand_ids(27, 2, 6), 127, "cur_len == max_length: unchanged (only max_length - 1 forces)")
    # Temperature
    add("temperature.0_7", "TemperatureLogitsWarper", {"temperature": 0.7}, rand_ids(28, 2, 3), 128,
        "scores / float32(0.7)")
    add("temperature.1_3", "TemperatureLogitsWarper", {"temperature": 1.3}, rand_ids(29, 3, 2), 129, "")
    # TopK
    add("top_k.5", "TopKLogitsWarper", {"top_k": 5, "min_tokens_to_keep": 1}, rand_ids(30, 3, 2), 130,
        "tokens with score < the 5th largest become -inf (ties with it are kept)")
    add("top_k.larger_than_vocab", "TopKLogitsWarper", {"top_k": 600, "min_tokens_to_keep": 1},
        rand_ids(31, 2, 2), 131, "k = min(max(600, 1), 512) = 512: unchanged")
    add("top_k.min_tokens_to_keep", "TopKLogitsWarper", {"top_k": 1, "min_tokens_to_keep": 3},
        rand_ids(32, 2, 2), 132, "k = max(1, 3) = 3")
    sc = rand_scores(133, 2, ties=False)
    for r in range(2):
        srt = np.sort(sc[r])[::-1]
        sc[r, np.where(sc[r] == srt[4])[0]] = srt[3]  # 4th and 5th largest equal
        sc[r, np.where(sc[r] == srt[7])[0]] = srt[3] if r == 1 else srt[7]
    add("top_k.tie_at_k", "TopKLogitsWarper", {"top_k": 4, "min_tokens_to_keep": 1}, rand_ids(33, 2, 2), sc,
        "the 4th largest value is shared by 2 (row 0) / 3 (row 1) tokens: all of them kept (5 / 6 survive)")
    sc = rand_scores(134, 2)
    sc[0, 3:] = float("-inf")
    add("top_k.with_inf", "TopKLogitsWarper", {"top_k": 10, "min_tokens_to_keep": 1}, rand_ids(34, 2, 2), sc,
        "row 0 has only 3 finite scores: threshold is -inf, nothing more removed")
    # TopP (ascending stable sort; remove cumsum <= 1 - top_p)
    add("top_p.0_9", "TopPLogitsWarper", {"top_p": 0.9, "min_tokens_to_keep": 1}, rand_ids(35, 3, 2), 135, "")
    add("top_p.0_5", "TopPLogitsWarper", {"top_p": 0.5, "min_tokens_to_keep": 1}, rand_ids(36, 2, 2), 136, "")
    sc = rand_scores(137, 2)
    sc[:, 42] = sc.max() + 6.0
    add("top_p.keeps_one", "TopPLogitsWarper", {"top_p": 0.3, "min_tokens_to_keep": 1}, rand_ids(37, 2, 2), sc,
        "one token holds > 30% of the mass: exactly one token survives")
    add("top_p.keeps_one.min_tokens_to_keep_2", "TopPLogitsWarper", {"top_p": 0.3, "min_tokens_to_keep": 2},
        rand_ids(38, 2, 2), sc.copy(), "same scores, min_tokens_to_keep 2: the two best survive")
    sc = rand_scores(139, 2, ties=False)
    for r in range(2):  # ties well inside the kept and the removed regions
        srt = np.sort(sc[r])[::-1]
        sc[r, [10, 11, 12]] = srt[1]
        sc[r, [20, 21]] = srt[200]
    add("top_p.ties", "TopPLogitsWarper", {"top_p": 0.8, "min_tokens_to_keep": 1}, rand_ids(39, 2, 2), sc,
        "groups of equal scores that do not straddle the threshold: result independent of the tie order")
    C.append(make_top_p_straddle())
    return C


def make_top_p_straddle():
    """Two equal scores straddling the top-p threshold: only here does the tie order matter."""
    g = np.random.RandomState(140)
    row = (g.standard_normal(VOCAB) * 2.0).astype(np.float32)
    row[[100, 300]] = np.float32(5.0)  # a tie near the top
    order = np.argsort(row, kind="stable")
    cum = np.cumsum(softmax_f32(row[order]), dtype=np.float32)
    pos = int(np.where(order == 100)[0][0])  # ascending: 100 comes first, then 300
    assert order[pos + 1] == 300
    top_p = float(1.0 - (float(cum[pos]) + float(cum[pos + 1])) / 2.0)  # threshold between the two
    return {"name": "top_p.tie_straddles_threshold", "class": "TopPLogitsWarper",
            "params": {"top_p": top_p, "min_tokens_to_keep": 1},
            "input_ids": np.array([[0, 5]], dtype=np.int64), "scores": row[None, :].copy(),
            "note": "tokens 100 and 300 have equal scores and the threshold falls between their cumulative "
                    "sums: with the stable ascending order (lower id first) token 100 is removed and 300 "
                    "kept; torch.sort (unstable) may do either, so this case pins the tie rule", 
            "tie_order_dependent": True}


def chain_cases():
    C = []
    # 1. sampling-style chain, num_beams 1 (min_tokens_to_keep 1)
    opt = {"repetition_penalty": 1.2, "no_repeat_ngram_size": 2, "bad_words_ids": [[5], [3, 4]],
           "min_new_tokens": 4, "temperature": 0.8, "top_k": 20, "top_p": 0.9, "num_beams": 1, "do_sample": True}
    ids = np.array([[0, 3, 9, 3], [0, 17, 17, 2]], dtype=np.int64)
    sc = rand_scores(201, 2)
    sc[:, [3, 4, 9, 17]] += 4.0  # make the repeated / banned tokens matter
    C.append({"name": "chain.sampling_beams1", "options": opt, "input_ids": ids, "scores": sc,
              "encoder_input_ids": None, "max_length": 20})
    # 2. num_beams 2 (min_tokens_to_keep 2), min_length active, encoder n-grams, tiny top_p.
    #    (A pure chain on the given scores; inside beam_sample HF applies the warpers to
    #    processed log-probs + running beam scores.)
    enc = [[40, 41, 42, 43, 41, 44]]
    opt = {"encoder_no_repeat_ngram_size": 2, "min_length": 5, "forced_eos_token_id": EOS, "max_new_tokens": 8,
           "temperature": 1.5, "top_k": 3, "top_p": 0.1, "num_beams": 2, "do_sample": True}
    ids = np.array([[0, 9, 41, 7], [0, 9, 43, 41]], dtype=np.int64)
    sc = rand_scores(202, 2, ties=False)
    sc[:, [1, 42, 44]] += 6.0
    C.append({"name": "chain.beams2_min_tokens_to_keep_2", "options": opt, "input_ids": ids, "scores": sc,
              "encoder_input_ids": enc, "max_length": 9})
    # 3. the same at cur_len == max_length - 1: forced eos, then the warpers keep only eos
    ids = np.array([[0, 9, 41, 7, 8, 9, 10, 11], [0, 9, 43, 41, 6, 6, 6, 6]], dtype=np.int64)
    C.append({"name": "chain.beams2_forced_eos", "options": dict(opt), "input_ids": ids,
              "scores": rand_scores(203, 2), "encoder_input_ids": enc, "max_length": 9})
    # 4. do_sample with only a temperature: GenerationConfig's default top_k = 50 still applies
    opt = {"temperature": 0.7, "num_beams": 1, "do_sample": True}
    C.append({"name": "chain.default_top_k_50", "options": opt, "input_ids": rand_ids(204, 2, 3),
              "scores": rand_scores(204, 2), "encoder_input_ids": None, "max_length": 20})
    return C


# --------------------------------------------------------------------------------------------
# End-to-end cases on the tiny model.  Seeds were found with --scan (see README): each case
# asserts the property it was chosen for, and that every decision has a margin >= MIN_MARGIN.
# --------------------------------------------------------------------------------------------
GREEDY_CASES = [
    ("greedy.plain_stops_on_eos", "tiny", [825], {"max_new_tokens": 16}, ["ends_with_eos"]),
    ("greedy.no_repeat_ngram_2", "tiny", [11], {"max_new_tokens": 16, "no_repeat_ngram_size": 2},
     ["differs_from_plain"]),
    ("greedy.no_repeat_ngram_3", "tiny", [11], {"max_new_tokens": 16, "no_repeat_ngram_size": 3},
     ["differs_from_plain"]),
    ("greedy.repetition_penalty_1_5", "tiny", [3], {"max_new_tokens": 16, "repetition_penalty": 1.5},
     ["differs_from_plain"]),
    ("greedy.min_new_tokens_6", "tiny", [825], {"max_new_tokens": 16, "min_new_tokens": 6},
     ["differs_from_plain"]),
    ("greedy.min_length_8", "tiny", [825], {"max_new_tokens": 16, "min_length": 8}, ["differs_from_plain"]),
    ("greedy.bad_words_single", "tiny", [825], {"max_new_tokens": 16, "bad_words_ids": [[451], [1], [77]]},
     ["differs_from_plain"]),
    ("greedy.bad_words_multi", "tiny", [825], {"max_new_tokens": 16, "bad_words_ids": [[233, 451], [9, 9, 9]]},
     ["differs_from_plain"]),
    ("greedy.bad_words_eos_only", "tiny", [825], {"max_new_tokens": 16, "bad_words_ids": [[1]]},
     ["ends_with_eos", "same_as_plain"]),
    ("greedy.forced_bos", "tiny", [0], {"max_new_tokens": 12, "forced_bos_token_id": 5}, ["differs_from_plain"]),
    ("greedy.forced_eos", "tiny", [0], {"max_new_tokens": 8, "forced_eos_token_id": EOS},
     ["ends_with_eos", "full_length"]),
    ("greedy.encoder_no_repeat_ngram_2", "tiny", [497], {"max_new_tokens": 16, "encoder_no_repeat_ngram_size": 2},
     ["differs_from_plain"]),
    ("greedy.batch_padded_one_finishes", "tiny", [825, 0], {"max_new_tokens": 10}, ["row_padded_after_eos"]),
    ("greedy.batch_padded_both_finish", "tiny", [38, 825], {"max_new_tokens": 10},
     ["row_padded_after_eos", "stopped_early"]),
    ("greedy.tied_plain", "tiny_tied", [1], {"max_new_tokens": 12}, []),
    ("greedy.tied_no_repeat_ngram_2", "tiny_tied", [1], {"max_new_tokens": 12, "no_repeat_ngram_size": 2},
     ["differs_from_plain"]),
]

BEAM_CASES = [
    # num_beams 2 on a document whose beams finish on eos (2 finished hypotheses by step 10)
    ("beam.b2.lp1_0.es_false", "tiny", [60], {"num_beams": 2, "max_new_tokens": 16, "length_penalty": 1.0,
                                              "early_stopping": False}, ["some_eos_hyp", "best_open", "max_length"]),
    ("beam.b2.lp1_0.es_true", "tiny", [60], {"num_beams": 2, "max_new_tokens": 16, "length_penalty": 1.0,
                                             "early_stopping": True}, ["best_ends_with_eos", "all_done"]),
    ("beam.b2.lp1_0.es_never", "tiny", [60], {"num_beams": 2, "max_new_tokens": 16, "length_penalty": 1.0,
                                              "early_stopping": "never"}, ["best_open", "max_length"]),
    ("beam.b2.lp0_6.es_false", "tiny", [60], {"num_beams": 2, "max_new_tokens": 16, "length_penalty": 0.6,
                                              "early_stopping": False}, ["best_ends_with_eos", "all_done"]),
    ("beam.b2.lp0_6.es_true", "tiny", [60], {"num_beams": 2, "max_new_tokens": 16, "length_penalty": 0.6,
                                             "early_stopping": True}, ["best_ends_with_eos", "all_done"]),
    ("beam.b2.lp0_6.es_never", "tiny", [60], {"num_beams": 2, "max_new_tokens": 16, "length_penalty": 0.6,
                                              "early_stopping": "never"}, ["best_ends_with_eos", "all_done"]),
    ("beam.b2.lp2_0.es_false", "tiny", [171], {"num_beams": 2, "max_new_tokens": 16, "length_penalty": 2.0,
                                               "early_stopping": False}, ["some_eos_hyp", "best_open"]),
    ("beam.b2.lp2_0.es_true", "tiny", [171], {"num_beams": 2, "max_new_tokens": 16, "length_penalty": 2.0,
                                              "early_stopping": True}, ["best_ends_with_eos", "all_done"]),
    ("beam.b2.lp-0_5.es_never", "tiny", [171], {"num_beams": 2, "max_new_tokens": 16, "length_penalty": -0.5,
                                                "early_stopping": "never"}, ["best_ends_with_eos", "all_done"]),
    ("beam.b2.nrs2.lp1_0", "tiny", [1280], {"num_beams": 2, "max_new_tokens": 16, "num_return_sequences": 2},
     ["some_eos_hyp"]),
    # num_beams 4
    ("beam.b4.lp1_0", "tiny", [1280], {"num_beams": 4, "max_new_tokens": 16}, ["some_eos_hyp", "max_length"]),
    ("beam.b4.lp0_6", "tiny", [1280], {"num_beams": 4, "max_new_tokens": 16, "length_penalty": 0.6},
     ["best_ends_with_eos", "max_length"]),
    ("beam.b4.lp2_0", "tiny", [1280], {"num_beams": 4, "max_new_tokens": 16, "length_penalty": 2.0},
     ["some_eos_hyp", "best_open"]),
    ("beam.b4.es_true", "tiny", [1280], {"num_beams": 4, "max_new_tokens": 12, "early_stopping": True}, []),
    ("beam.b4.es_never.lp0_6", "tiny", [1280], {"num_beams": 4, "max_new_tokens": 12, "length_penalty": 0.6,
                                                "early_stopping": "never"}, []),
    ("beam.b4.nrs2.lp0_6", "tiny", [6], {"num_beams": 4, "max_new_tokens": 16, "length_penalty": 0.6,
                                         "num_return_sequences": 2}, ["mixed_returned"]),
    ("beam.b4.min_new_tokens", "tiny", [38], {"num_beams": 4, "max_new_tokens": 14, "length_penalty": 0.6,
                                             "min_new_tokens": 8}, ["differs_from_plain"]),
    ("beam.b4.no_repeat_ngram_2", "tiny", [3], {"num_beams": 4, "max_new_tokens": 14,
                                                 "no_repeat_ngram_size": 2}, ["differs_from_plain"]),
    ("beam.b4.repetition_penalty_1_5", "tiny", [3], {"num_beams": 4, "max_new_tokens": 12,
                                                     "repetition_penalty": 1.5}, ["differs_from_plain"]),
    ("beam.b4.max_new_tokens_8", "tiny", [825], {"num_beams": 4, "max_new_tokens": 8, "length_penalty": 0.6},
     []),
    # batches of 2 documents (right-padded encoder input + attention mask)
    ("beam.batch2.b4.lp1_0", "tiny", [825, 1280], {"num_beams": 4, "max_new_tokens": 12}, []),
    ("beam.batch2.b2.lp0_6.nrs2", "tiny", [60, 171], {"num_beams": 2, "max_new_tokens": 16, "length_penalty": 0.6,
                                                      "num_return_sequences": 2}, ["all_done"]),
    ("beam.batch2.b2.lp1_0.es_false", "tiny", [171, 60], {"num_beams": 2, "max_new_tokens": 16,
                                                          "early_stopping": False}, []),
    # the tied-head configuration (its eos is never competitive: forced_eos ends every beam)
    ("beam.tied.b4.lp1_0", "tiny_tied", [1], {"num_beams": 4, "max_new_tokens": 10}, ["max_length"]),
    ("beam.tied.b4.no_repeat_ngram_2", "tiny_tied", [1], {"num_beams": 4, "max_new_tokens": 10,
                                                          "no_repeat_ngram_size": 2}, ["differs_from_plain"]),
    ("beam.tied.b2.forced_eos", "tiny_tied", [1], {"num_beams": 2, "max_new_tokens": 8,
                                                   "forced_eos_token_id": EOS}, ["best_ends_with_eos"]),
]


def _json_opts(opt):
    return {k: v for k, v in opt.items()}


def teacher_forced_score(model, enc_row, mask_row, seq, opt):
    """Score of one returned beam sequence recomputed in one teacher-forced pass (no cache)."""
    if EOS in seq[1:]:
        n = seq.index(EOS, 1)
        toks, hyp_len = seq[: n + 1], n
    else:
        toks, hyp_len = seq, len(seq)
    with torch.no_grad():
        o = model(input_ids=torch.tensor([enc_row]), attention_mask=torch.tensor([mask_row]),
                  decoder_input_ids=torch.tensor([toks[:-1]]), use_cache=False, return_dict=True)
    logp = torch.nn.functional.log_softmax(o.logits[0], dim=-1).numpy()
    procs = build_processors(opt, [enc_row], opt["max_new_tokens"] + 1)
    total = 0.0
    for t in range(len(toks) - 1):
        row = apply_list(procs, np.array([toks[: t + 1]], dtype=np.int64), logp[t:t + 1].copy())
        total += float(row[0, toks[t + 1]])
    return total / hyp_len ** float(opt.get("length_penalty", 1.0))


RULES = {
    "max_length": "max_length = max_new_tokens + 1 (the decoder start token counts); generation stops when "
                  "the sequences (start token included) reach max_length",
    "processor_order": "RepetitionPenalty, NoRepeatNGram, EncoderNoRepeatNGram, NoBadWords, MinLength, "
                       "MinNewTokensLength (prompt_length_to_skip 1), ForcedBOSToken, ForcedEOSToken(max_length); "
                       "then (sampling only) Temperature, TopK, TopP with min_tokens_to_keep 2 if num_beams > 1 else 1",
    "greedy": "argmax (first maximum) of the processed raw logits; finished rows emit pad 0; stop when every row "
              "has emitted eos or at max_length",
    "beam_candidates": "scores = processors(log_softmax(logits)) + running beam score (float32; beams 1.. of each "
                       "row start at -1e9); per row the top 2*num_beams of num_beams*vocab, descending (equal "
                       "scores: lower beam*vocab+token first); walk them in order: eos at rank < num_beams -> "
                       "finished hypothesis (tokens before eos, score = candidate score), eos at rank >= num_beams "
                       "-> skipped, other tokens fill the next beams until num_beams are filled",
    "hypothesis_score": "sum_logprobs / len(hyp) ** length_penalty in double, len(hyp) = tokens INCLUDING the "
                        "decoder start token and EXCLUDING eos; sum_logprobs = the float32 candidate score "
                        "(for an eos hypothesis it includes eos's own processed log-prob)",
    "nbest_list": "per row at most num_beams hypotheses; worst starts at 1e9; add if fewer than num_beams or "
                  "score > worst; on overflow drop the lowest (ties: the earliest added) and worst = the new "
                  "lowest; while not full worst = min(worst, score)",
    "is_done": "after a row's candidates: c = cur_len + (number of not-done rows with index <= this row) "
               "[transformers 4.27.1 increments cur_len inside the per-row loop]; best = that row's top candidate "
               "score; fewer than num_beams hypotheses -> not done; early_stopping true -> done; false -> "
               "worst >= best / c ** length_penalty; 'never' -> worst >= best / max_length ** length_penalty if "
               "length_penalty > 0 else worst >= best / c ** length_penalty. A done row stays done; its beams "
               "get pad tokens, score 0, source beam 0",
    "stop": "after appending the step's tokens: stop if every row is done or length >= max_length",
    "finalize": "rows not done add their num_beams open beams (full sequence, final running score); per row "
                "the num_return_sequences best (Python stable sort by score, taken from the end: among equal "
                "scores the later added first); width = min(longest + 1, max_length); a sequence shorter than "
                "the width gets eos then pad 0; sequence_scores = the double score rounded to float32",
    "top_p": "ascending stable sort (equal scores: lower token id first = removed first), float32 softmax and "
             "running sum, remove where cumsum <= float32(1 - top_p), keep the last min_tokens_to_keep sorted "
             "positions when min_tokens_to_keep > 1",
    "top_k": "k = min(max(top_k, min_tokens_to_keep), vocab); remove scores < the k-th largest (ties kept)",
}


def run_greedy_case(models, name, cfg, seeds, opt, props):
    m = models[cfg]
    ids, mask = enc_batch(seeds)
    r = greedy(m, ids, mask, opt)
    seqs = r["sequences"]
    plain = greedy(m, ids, mask, {"max_new_tokens": opt["max_new_tokens"]})["sequences"]
    maxlen = opt["max_new_tokens"] + 1
    checks = {
        "ends_with_eos": all(EOS in row for row in seqs.tolist()),
        "differs_from_plain": not (plain.shape == seqs.shape and (plain == seqs).all()),
        "same_as_plain": plain.shape == seqs.shape and (plain == seqs).all(),
        "full_length": seqs.shape[1] == maxlen,
        "stopped_early": seqs.shape[1] < maxlen,
        "row_padded_after_eos": any(EOS in row and row.index(EOS) < len(row) - 1 for row in seqs.tolist()),
    }
    for p in props:
        assert checks[p], (name, p, seqs.tolist())
    assert r["min_margin"] >= MIN_MARGIN, (name, r["min_margin"])
    # cross-check 1: without the KV cache (full recompute every step) -> same ids
    nc = greedy(m, ids, mask, opt, use_cache=False)["sequences"]
    assert nc.shape == seqs.shape and (nc == seqs).all(), name
    # cross-check 2: every row of a batch equals the document decoded alone (then pad)
    if len(seeds) > 1:
        for i, s in enumerate(seeds):
            solo = greedy(m, *enc_batch([s]), opt)["sequences"][0].tolist()
            row = seqs[i].tolist()
            assert row[: len(solo)] == solo and all(t == PAD for t in row[len(solo):]), (name, i)
    return {
        "name": name, "config": cfg, "enc_seeds": seeds, "enc_input_ids": ids, "attention_mask": mask,
        "options": _json_opts(opt), "max_length": maxlen, "processors": r["processors"],
        "sequences": seqs.tolist(),
        "plain_greedy_sequences": plain.tolist(),
        "min_argmax_gap": r["min_margin"], "properties": props,
    }


def run_beam_case(models, name, cfg, seeds, opt, props):
    m = models[cfg]
    ids, mask = enc_batch(seeds)
    r = beam_search(m, ids, mask, opt)
    seqs = r["sequences"]
    nrs = opt.get("num_return_sequences", 1)
    best = [seqs[b * nrs].tolist() for b in range(len(seeds))]
    plain_opt = {k: opt[k] for k in ("num_beams", "max_new_tokens", "length_penalty", "early_stopping",
                                     "num_return_sequences") if k in opt}
    plain = beam_search(m, ids, mask, plain_opt)["sequences"]
    checks = {
        "some_eos_hyp": sum(r["n_eos_hyps"]) > 0,
        "best_ends_with_eos": all(EOS in row for row in best),
        "best_open": all(EOS not in row for row in best),
        "all_done": r["stopped_by"] == "all_done",
        "max_length": r["stopped_by"] == "max_length",
        "differs_from_plain": not (plain.shape == seqs.shape and (plain == seqs).all()),
        "mixed_returned": len({EOS in row for row in seqs.tolist()}) == 2,
    }
    for p in props:
        assert checks[p], (name, p, seqs.tolist(), r["stopped_by"], r["n_eos_hyps"])
    assert r["min_margin"] >= MIN_MARGIN, (name, r["min_margin"], sorted(r["margins"], key=lambda x: x[1])[:3])
    # cross-check 1: recompute without the KV cache (no cache reordering at all) -> same result
    nc = beam_search(m, ids, mask, opt, use_cache=False)
    assert nc["sequences"].shape == seqs.shape and (nc["sequences"] == seqs).all(), name
    assert np.allclose(nc["sequence_scores"], r["sequence_scores"], rtol=1e-5, atol=1e-6), name
    # cross-check 2: batch rows vs each document alone.  Alone == batch row exactly when the
    # batch is run WITHOUT 4.27.1's per-row cur_len increment (see README); record whether that
    # increment changed this batch's output.
    quirk = None
    if len(seeds) > 1:
        nq = beam_search(m, ids, mask, opt, cur_len_quirk=False)
        quirk = not (nq["sequences"].shape == seqs.shape and (nq["sequences"] == seqs).all()
                     and nq["stopped_at_length"] == r["stopped_at_length"])
        for i, s in enumerate(seeds):
            solo = beam_search(m, *enc_batch([s]), opt)
            for j in range(nrs):
                srow = solo["sequences"][j].tolist()
                brow = nq["sequences"][i * nrs + j].tolist()
                assert brow[: len(srow)] == srow and all(t == PAD for t in brow[len(srow):]), (name, i, j)
                assert abs(float(solo["sequence_scores"][j]) - float(nq["sequence_scores"][i * nrs + j])) < 1e-5
    # cross-check 3: every returned score equals the teacher-forced sum of processed log-probs of
    # its tokens divided by (hypothesis length incl. start, excl. eos) ** length_penalty
    for i in range(seqs.shape[0]):
        b = i // nrs
        tf = teacher_forced_score(m, ids[b], mask[b], seqs[i].tolist(), opt)
        assert abs(tf - r["sequence_scores_f64"][i]) <= 2e-5 * max(1.0, abs(tf)), (name, i, tf, r["sequence_scores_f64"][i])
    return {
        "name": name, "config": cfg, "enc_seeds": seeds, "enc_input_ids": ids, "attention_mask": mask,
        "options": _json_opts(opt), "max_length": opt["max_new_tokens"] + 1, "processors": r["processors"],
        "sequences": seqs.tolist(),
        "sequence_scores": [float(x) for x in r["sequence_scores"]],
        "sequence_scores_unrounded": [float(x) for x in r["sequence_scores_f64"]],
        "stopped_at_length": r["stopped_at_length"], "stopped_by": r["stopped_by"],
        "finished_hypotheses": [[{"tokens": t, "score": s, "ended_with_eos": e} for s, t, e in h]
                                for h in r["hyps"]],
        "n_eos_hypotheses_added": r["n_eos_hyps"],
        "min_decision_margin": r["min_margin"],
        "per_row_cur_len_increment_changed_output": quirk,
        "properties": props,
    }


# --------------------------------------------------------------------------------------------
# Checks of the processor arithmetic against torch ops (float32 semantics)
# --------------------------------------------------------------------------------------------
def torch_check_processor(case, out):
    cls, p = case["class"], case["params"]
    s = torch.from_numpy(case["scores"].copy())
    ids = torch.from_numpy(case["input_ids"])
    if cls == "RepetitionPenaltyLogitsProcessor":
        g = torch.gather(s, 1, ids)
        g = torch.where(g < 0, g * p["penalty"], g / p["penalty"])
        s.scatter_(1, ids, g)
        assert np.array_equal(s.numpy(), out), case["name"]
    elif cls == "TemperatureLogitsWarper":
        assert np.array_equal((s / p["temperature"]).numpy(), out), case["name"]
    elif cls == "TopPLogitsWarper" and not case.get("tie_order_dependent"):
        srt, idx = torch.sort(s, descending=False, stable=True)
        cum = srt.softmax(dim=-1).cumsum(dim=-1)
        rem = cum <= (1 - p["top_p"])
        if p["min_tokens_to_keep"] > 1:
            rem[..., -p["min_tokens_to_keep"]:] = False
        rem = rem.scatter(1, idx, rem)
        assert np.array_equal(s.masked_fill(rem, NEG_INF).numpy(), out), case["name"]


def top_p_tie_independent(scores, top_p, keep):
    """True when the top-p result does not depend on the order of equal scores."""
    for r in range(scores.shape[0]):
        a, _, _ = top_p_remove_mask(scores[r], top_p, keep)
        b, _, _ = top_p_remove_mask(scores[r], top_p, keep, reverse_ties=True)
        if not np.array_equal(np.where(a, NEG_INF, scores[r]), np.where(b, NEG_INF, scores[r])):
            return False
    return True


def top_p_margin(scores, top_p, keep):
    """Smallest |cumsum - (1 - top_p)| over all sorted positions (float64 and float32 agree on
    the decision when this is >> 1e-7)."""
    mm = math.inf
    for r in range(scores.shape[0]):
        _, order, cum = top_p_remove_mask(scores[r], top_p, keep)
        x = scores[r][order].astype(np.float64)
        p = np.exp(x - x.max())
        c64 = np.cumsum(p / p.sum())
        thr = 1.0 - top_p
        mm = min(mm, float(np.min(np.abs(c64 - thr))), float(np.min(np.abs(cum.astype(np.float64) - thr))))
    return mm


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------
def save_safetensors(tensors, path, metadata):
    """Minimal safetensors writer (F32 / I64), keys sorted, header padded to 8 bytes."""
    dt = {np.dtype("float32"): "F32", np.dtype("int64"): "I64"}
    header, blobs, off = {}, [], 0
    for k in sorted(tensors):
        a = np.ascontiguousarray(tensors[k])
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        b = a.tobytes()
        header[k] = {"dtype": dt[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for b in blobs:
            f.write(b)


def tolist(x):
    if isinstance(x, np.ndarray):
        return x.tolist()
    return x


def git_head(path):
    try:
        import subprocess

        return subprocess.check_output(["git", "-C", path, "rev-parse", "HEAD"], text=True).strip()
    except Exception:
        return "unknown"


def scan(models):
    """The search that picked the seeds of GREEDY_CASES / BEAM_CASES (prints candidates)."""
    m = models["tiny"]
    print("greedy, max_new_tokens 16: seeds whose plain greedy output contains eos / an encoder bigram")
    for s in range(1500):
        ids, mask = enc_batch([s])
        seq = greedy(m, ids, mask, {"max_new_tokens": 16})["sequences"][0].tolist()
        eb = set(zip(ids[0][:-1], ids[0][1:]))
        if EOS in seq or any(b in eb for b in zip(seq[:-1], seq[1:])):
            print(" seed", s, "L", len(ids[0]), seq)
    print("beam, num_beams 2 and 4, max_new_tokens 16: seeds with >= 2 eos hypotheses")
    for K in (2, 4):
        for s in range(1500):
            ids, mask = enc_batch([s])
            r = beam_search(m, ids, mask, {"num_beams": K, "max_new_tokens": 16, "early_stopping": True})
            if r["n_eos_hyps"][0] >= 2:
                print(" K", K, "seed", s, "L", len(ids[0]), r["n_eos_hyps"], r["stopped_by"], r["stopped_at_length"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default="/work/shared")
    ap.add_argument("--ref-root", default="/tmp/ref")
    ap.add_argument("--check-only", action="store_true")
    ap.add_argument("--scan", action="store_true", help="print the seed search behind the case list and exit")
    args = ap.parse_args()
    setup(args.shared, args.ref_root)
    np.seterr(invalid="ignore", divide="ignore", over="ignore")

    models = {"tiny": build_model(False), "tiny_tied": build_model(True)}
    if args.scan:
        scan(models)
        return

    # 1. faithfulness against the shared goldens
    ref, _ = load_st(DEC_REF)
    g = greedy(models["tiny"], ref["greedy.enc_input_ids"].tolist(), [[1] * ref["greedy.enc_input_ids"].shape[1]],
               {"max_new_tokens": ref["greedy.sequence"].shape[1] - 1})
    if not np.array_equal(g["sequences"], ref["greedy.sequence"]):
        raise SystemExit("ABORT: greedy loop does not reproduce greedy.sequence: %s vs %s"
                         % (g["sequences"].tolist(), ref["greedy.sequence"].tolist()))
    dl = max(float(np.abs(a - b).max()) for a, b in zip(g["step_logits"], ref["greedy.step_logits"]))
    if dl > 1e-4 * float(np.abs(ref["greedy.step_logits"]).max()):
        raise SystemExit("ABORT: step logits differ by %g" % dl)
    with torch.no_grad():
        o = models["tiny_tied"](input_ids=torch.from_numpy(ref["dec.enc_input_ids"]),
                                decoder_input_ids=torch.from_numpy(ref["dec.decoder_input_ids"]), return_dict=True)
    dt = float((o.logits - torch.from_numpy(ref["dec.tied.logits"])).abs().max())
    if dt > 1e-4 * float(np.abs(ref["dec.tied.logits"]).max()):
        raise SystemExit("ABORT: tied model does not reproduce dec.tied.logits (%g)" % dt)
    print("faithfulness: greedy.sequence reproduced exactly (step logits max diff %.2e), tied logits %.2e" % (dl, dt))

    tensors = {}
    out = {
        "format": "locost generation references, v1 (see README.md)",
        "semantics": "Hugging Face transformers 4.27.1 generate(): greedy_search / beam_search with "
                     "_get_logits_processor order; warpers of _get_logits_warper (sample)",
        "safetensors": "generation.safetensors",
        "special_tokens": {"vocab_size": VOCAB, "pad_token_id": PAD, "eos_token_id": EOS,
                           "decoder_start_token_id": START},
        "min_decision_margin_required": MIN_MARGIN,
        "rules": RULES,
    }

    # 2. processor cases
    pcs = []
    for c in processor_cases():
        exp = PROC_FN[c["class"]](c["input_ids"], c["scores"], **c["params"])
        torch_check_processor(c, exp)
        if c["class"] == "TopPLogitsWarper" and not c.get("tie_order_dependent"):
            mm = top_p_margin(c["scores"], c["params"]["top_p"], c["params"]["min_tokens_to_keep"])
            assert mm > 1e-5, (c["name"], mm)
        if c["class"] == "TopPLogitsWarper":
            ind = top_p_tie_independent(c["scores"], c["params"]["top_p"], c["params"]["min_tokens_to_keep"])
            assert ind != bool(c.get("tie_order_dependent")), (c["name"], ind)
        key = "proc." + c["name"]
        tensors[key + ".scores"] = c["scores"].astype(np.float32)
        tensors[key + ".expected"] = exp.astype(np.float32)
        n_changed = int((exp != c["scores"]).sum())
        d = {"name": c["name"], "class": c["class"], "params": c["params"],
             "generate_kwargs": GEN_KWARG[c["class"]], "input_ids": c["input_ids"].tolist(),
             "scores": key + ".scores", "expected": key + ".expected", "n_changed": n_changed, "note": c["note"]}
        if c.get("tie_order_dependent"):
            d["tie_order_dependent"] = True
        pcs.append(d)
    out["processor_cases"] = pcs

    chs = []
    for c in chain_cases():
        opt = c["options"]
        ml = opt.get("max_new_tokens", 19) + 1
        P = build_processors(opt, c["encoder_input_ids"], ml)
        W = build_warpers(opt)
        mid = apply_list(P, c["input_ids"], c["scores"])
        exp = mid
        for nm, fn in W:
            if nm == "TopPLogitsWarper":
                keep = 2 if opt.get("num_beams", 1) > 1 else 1
                mm = top_p_margin(exp, opt["top_p"], keep)
                assert mm > 1e-5 and top_p_tie_independent(exp, opt["top_p"], keep), (c["name"], mm)
            exp = fn(c["input_ids"], exp)
        key = c["name"]
        tensors[key + ".scores"] = c["scores"]
        tensors[key + ".after_processors"] = mid
        tensors[key + ".expected"] = exp
        chs.append({"name": c["name"], "options": opt, "max_length": ml,
                    "min_tokens_to_keep": 2 if opt.get("num_beams", 1) > 1 else 1,
                    "input_ids": c["input_ids"].tolist(), "encoder_input_ids": c["encoder_input_ids"],
                    "processors": [p[0] for p in P], "warpers": [w[0] for w in W],
                    "scores": key + ".scores", "after_processors": key + ".after_processors",
                    "expected": key + ".expected",
                    "n_finite_expected": [int(np.isfinite(r).sum()) for r in exp]})
    out["chain_cases"] = chs
    print("processor cases: %d, chains: %d" % (len(pcs), len(chs)))

    # 3. end-to-end
    out["greedy_cases"] = [run_greedy_case(models, *c) for c in GREEDY_CASES]
    print("greedy cases: %d" % len(out["greedy_cases"]))
    out["beam_cases"] = [run_beam_case(models, *c) for c in BEAM_CASES]
    print("beam cases: %d" % len(out["beam_cases"]))
    for c in out["greedy_cases"] + out["beam_cases"]:
        for k in ("enc_input_ids", "attention_mask"):
            c[k] = tolist(c[k])

    import refenv

    out["provenance"] = {
        "transformers_semantics": "4.27.1 (generation/logits_process.py, beam_search.py, utils.py); "
                                  "own implementation, transformers not installed",
        "locost_repo": "flbbb/locost-summarization@" + git_head(refenv.LOCOST_DIR),
        "einops": "arogozhnikov/einops@" + git_head(refenv.EINOPS_DIR),
        "torch": torch.__version__, "numpy": np.__version__,
        "model": "tests/data/reference/tiny_locost (config.json / config_tied.json, model.safetensors)",
        "use_fast_fft_conv": False, "LOCOST_VAND_PRECISION": os.environ["LOCOST_VAND_PRECISION"],
        "threads": torch.get_num_threads(),
    }
    if args.check_only:
        print("check-only: nothing written")
        return
    jpath = os.path.join(HERE, "generation.json")
    with open(jpath, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    save_safetensors(tensors, os.path.join(HERE, "generation.safetensors"),
                     {"producer": "make_generation_references.py", "json": "generation.json"})
    # read back + size check
    with open(jpath) as f:
        json.load(f)
    back, _ = load_st(os.path.join(HERE, "generation.safetensors"))
    for k, v in tensors.items():
        assert np.array_equal(back[k], v) or (np.isnan(back[k]).any() is False and False), k
    total = sum(os.path.getsize(os.path.join(HERE, f)) for f in os.listdir(HERE)
                if os.path.isfile(os.path.join(HERE, f)))
    print("wrote generation.json (%d B), generation.safetensors (%d B); folder %d B"
          % (os.path.getsize(jpath), os.path.getsize(os.path.join(HERE, "generation.safetensors")), total))
    assert total < 2 * 1024 * 1024, "folder exceeds 2 MB"


if __name__ == "__main__":
    main()
