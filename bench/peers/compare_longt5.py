#!/usr/bin/python3
"""Side by side: LongT5 encoders (local and transient-global attention) of the ORIGINAL code
(PyTorch, CPU) against ours, LongT5-tglobal-base shape, fp32, 2 threads.

For each length L (default 4096, 16384) and attention type A (default local, transient-global),
alternately in one session:
  (a) original  /usr/bin/time -v python3 compare_longt5.py --child original --length L
                --attention A --runs R --warmup W
        a process of its own that builds the encoder from the original LOCOST repository
        (flbbb/locost-summarization @ 29f7947b, loaded at run time from the clones of the shared
        tools, nothing copied): its LOCOSTStack (embedding, blocks, final layer norm; for
        encoder_attention_type "local" it builds the blocked local mask with its
        _get_local_attention_mask, for "transient-global" it passes the 2-D mask through), its
        LOCOSTBlock with the self-attention sublayer swapped for LongT5's (layer norm, attention,
        residual) and its LongT5LayerFF, weights drawn by its LOCOSTPreTrainedModel._init_weights
        (LongT5's init). Attention: transient-global = the original's
        longt5_models.LongT5TransientGlobalAttention, unchanged. Local: the original repository has
        NO local-attention class (LOCOST kept only the transient-global one next to its S4D);
        `OriginalLocalAttention` below is that class with the global ("side") keys left out, i.e.
        Hugging Face's LongT5LocalAttention computation on the original's own helpers and
        relative-bias code (checked against the original's dense LongT5Attention with a band mask
        by --child selftest). Shape: d_model 768, d_kv 64, 12 heads, d_ff 2048 gated-gelu,
        12 layers, local_radius 127, global_block_size 16, 32 buckets, max_distance 128,
        vocab 32128. Times the forward over (1, L) random ids with an all-ones attention mask
        (always passed: given mask=None, the local module leaves out the locality mask, so a
        query sees up to 2·block_len - 1 tokens away, and the original transient-global module
        fails on inputs longer than one block) under torch.no_grad(): median of R runs after W
        warm-ups; prints `RESULT {json}` (also the time inside the attention and the
        feed-forward sublayers, and the process's CPU seconds per run).
  (b) ours      /usr/bin/time -v BUILD/bin/locost encode --model MODEL_A --ids IDS.json
                --out TMP --threads 2
        MODEL is `locost demo-checkpoint --family longt5 --config base --out MODEL` (made when
        missing; UNTRAINED random weights, same shapes). MODEL_A: MODEL itself when its
        config.json already has encoder_attention_type A, else MODEL-A, made by demo-checkpoint
        with --encoder-attention-type A (the two types store different tensors). The tool's own tokens/s (encode) is parsed from its
        stderr; "process" tokens/s = L / the whole process's wall time (start-up, weight load,
        encode, writing the output); peak RSS is the whole process.
Both sides run without OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (so OpenBLAS picks its kernels for
the CPU, as on a user's machine) and with OMP/OPENBLAS/MKL_NUM_THREADS=2.

Every measurement records "foreign": the share of the machine's CPU capacity that other
processes used meanwhile (/proc/stat minus the command's own CPU time); the original also per
run. The machine is shared: rerun what is dirty (> 0.05), or pass --wait-quiet S to wait (up to S
seconds) before each round until other processes use < 8 % of the CPUs.

Needs, for the original: Debian's python3-torch (+ libopenblas0-pthread) and the shared tools
(--tools, default /work/shared/tools/original) whose setup.sh cloned the originals into
--ref-root (default $REF_ROOT or /tmp/ref). Stdlib only in the parent; run with /usr/bin/python3:
    /usr/bin/python3 bench/peers/compare_longt5.py --md /tmp/longt5.md --json /tmp/longt5.json
    /usr/bin/python3 bench/peers/compare_longt5.py --skip-ours --attention local --lengths 4096
    /usr/bin/python3 bench/peers/compare_longt5.py --child selftest      # checks the local module
    /usr/bin/python3 bench/peers/compare_longt5.py --from-json /tmp/longt5.json
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
import types

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)  # bench/, which holds the shared timed.py
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
sys.path.insert(0, HERE)
from compare_original import log, machine  # noqa: E402
from timed import run_timed  # noqa: E402

THREADS = 2
ATTENTIONS = ("local", "transient-global")
# LongT5-tglobal-base (google/long-t5-tglobal-base config.json), encoder only
BASE = dict(vocab_size=32128, d_model=768, d_kv=64, d_ff=2048, num_layers=12, num_heads=12, local_radius=127,
            global_block_size=16, relative_attention_num_buckets=32, relative_attention_max_distance=128,
            layer_norm_epsilon=1e-6, feed_forward_proj="gated-gelu", dropout_rate=0.0, initializer_factor=1.0)
LOCOST_COMMIT = "29f7947ba3db50c6a6ba1466181f5e2547530830"


def bench_env(ref_root=None):
    """Environment of both sides: no OpenBLAS core-type/L2 overrides, 2 threads."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    env.update(OMP_NUM_THREADS=str(THREADS), OPENBLAS_NUM_THREADS=str(THREADS), MKL_NUM_THREADS=str(THREADS))
    if ref_root:
        env["REF_ROOT"] = ref_root
    return env


# ----------------------------------------------------------------------------------------------
# child side (torch; runs in its own process)


def cpu_busy_s():
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (v + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_cpu_s():
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class ForeignLoad:
    """CPU seconds other processes used while a block ran, as a share of the machine's capacity."""

    def __enter__(self):
        self.t0, self.b0, self.o0 = time.perf_counter(), cpu_busy_s(), own_cpu_s()
        return self

    def __exit__(self, *a):
        self.wall = time.perf_counter() - self.t0
        foreign = max(0.0, (cpu_busy_s() - self.b0) - (own_cpu_s() - self.o0))
        self.frac = foreign / max(1e-9, self.wall * (os.cpu_count() or 1))
        self.own_cpu = own_cpu_s() - self.o0


def load_original(tools):
    """Imports the original modules (shim + clones on sys.path via the shared tools' refenv) and
    defines the glue around them. Returns a namespace."""
    sys.path.insert(0, tools)
    import refenv  # noqa: F401  (shim first, then the clones of the originals)

    import torch
    from torch import nn

    import longt5_models as lt
    import models as lm
    from models_config import LOCOSTConfig

    class OriginalLocalAttention(lt.LongT5TransientGlobalAttention):
        """LongT5 local attention on the original's code: the original transient-global module
        (same projections, init, relative-bias buckets and blocking helpers) with the global side
        keys left out, which is what Hugging Face's LongT5LocalAttention computes: queries in
        blocks of local_radius + 1, keys/values of the 3 neighbouring blocks, relative bias +
        the blocked mask (which holds the locality |i - j| <= local_radius), softmax, output."""

        def drop_global(self):
            # parameters that only the global side uses (after _init_weights, which expects them)
            del self.global_input_layer_norm
            if self.has_relative_attention_bias:
                del self.global_relative_attention_bias

        def forward(self, hidden_states, mask=None, position_bias=None, layer_head_mask=None,
                    output_attentions=False):
            b, n = hidden_states.shape[:2]

            def blocks(x):  # (b, n, inner) -> (b, n_blocks, block_len, heads, d_kv)
                return lt._split_into_blocks(x.view(b, n, self.n_heads, self.key_value_proj_dim), self.block_len, dim=1)

            q = blocks(self.q(hidden_states))
            k = lt._concatenate_3_blocks(blocks(self.k(hidden_states)), block_dim=1, sequence_dim=2)
            v = lt._concatenate_3_blocks(blocks(self.v(hidden_states)), block_dim=1, sequence_dim=2)
            scores = torch.einsum("...qhd,...khd->...hqk", q, k)  # (b, n_blocks, heads, block_len, 3 block_len)
            if position_bias is None:
                if self.has_relative_attention_bias:
                    position_bias = self.compute_bias(self.block_len)
                else:
                    position_bias = torch.zeros((1, 1, self.n_heads, self.block_len, 3 * self.block_len),
                                                dtype=scores.dtype)
                if mask is not None:  # the stack's blocked mask (b, 1, n_blocks, block_len, 3 block_len)
                    position_bias = position_bias + torch.where(mask > 0, 0.0, -1e10).transpose(1, 2)
                position_bias = position_bias.type(scores.dtype)
            scores += position_bias
            w = nn.functional.softmax(scores.float(), dim=-1).type_as(scores)
            if layer_head_mask is not None:
                w = w * layer_head_mask
            out = torch.einsum("...hqk,...khd->...qhd", w, v).contiguous().view(b, -1, self.inner_dim)[:, :n, :]
            return (self.o(out), None, position_bias) + ((w,) if output_attentions else ())

    class SelfAttentionSublayer(nn.Module):
        """LongT5's encoder self-attention sublayer: pre-norm, attention, residual. Returns
        (hidden, None, position_bias, ...) as LOCOSTBlock expects from its layer[0]."""

        timers = {"attention": 0.0}

        def __init__(self, cfg, attention, has_relative_attention_bias):
            super().__init__()
            self.layer_norm = lt.LongT5LayerNorm(cfg.d_model, eps=cfg.layer_norm_epsilon)
            cls = OriginalLocalAttention if attention == "local" else lt.LongT5TransientGlobalAttention
            self.SelfAttention = cls(cfg, has_relative_attention_bias=has_relative_attention_bias)

        def forward(self, hidden_states, attention_mask=None, position_bias=None, layer_head_mask=None,
                    output_attentions=False, **_):
            t0 = time.perf_counter()
            out = self.SelfAttention(self.layer_norm(hidden_states), mask=attention_mask, position_bias=position_bias,
                                     layer_head_mask=layer_head_mask, output_attentions=output_attentions)
            self.timers["attention"] += time.perf_counter() - t0
            return (hidden_states + out[0],) + tuple(out[1:])

    def config(attention, **over):
        kw = dict(BASE, d_state=16, num_ssm_heads=1, use_fast_fft_conv=False, encoder_attention_type=attention,
                  is_encoder_decoder=False, use_cache=False, tie_word_embeddings=False)
        kw.update(over)
        cfg = LOCOSTConfig(**kw)
        cfg.is_decoder = False  # as LOCOSTModel sets up its encoder's config
        return cfg

    def init_fn(cfg):
        """The original LOCOSTPreTrainedModel._init_weights (LongT5's init) as a module -> None."""
        holder = types.SimpleNamespace(config=cfg)
        return lambda m: lm.LOCOSTPreTrainedModel._init_weights(holder, m)

    def build_encoder(cfg):
        """The original LOCOSTStack, its blocks' S4D sublayer swapped for LongT5 self-attention."""
        shared = nn.Embedding(cfg.vocab_size, cfg.d_model)  # LOCOSTModel's shared embedding, and
        shared.weight.data.normal_(mean=0.0, std=cfg.initializer_factor * 1.0)  # how _init_weights draws it
        enc = lm.LOCOSTStack(cfg, shared)  # post_init: the original _init_weights over every module
        for i, block in enumerate(enc.block):
            sub = SelfAttentionSublayer(cfg, cfg.encoder_attention_type, has_relative_attention_bias=(i == 0))
            sub.apply(init_fn(cfg))
            if isinstance(sub.SelfAttention, OriginalLocalAttention):
                sub.SelfAttention.drop_global()
            block.layer[0] = sub
        return enc.eval()

    ff_time = {"ff": 0.0}
    ff_fwd = lt.LongT5LayerFF.forward

    def ff_wrap(self_, h):
        t0 = time.perf_counter()
        r = ff_fwd(self_, h)
        ff_time["ff"] += time.perf_counter() - t0
        return r

    lt.LongT5LayerFF.forward = ff_wrap  # timing only; the original file is untouched

    class NS:
        pass

    ns = NS()
    ns.torch, ns.lt, ns.lm = torch, lt, lm
    ns.OriginalLocalAttention, ns.SelfAttentionSublayer = OriginalLocalAttention, SelfAttentionSublayer
    ns.config, ns.build_encoder, ns.ff_time, ns.init_fn = config, build_encoder, ff_time, init_fn
    ns.locost_dir = refenv.LOCOST_DIR
    return ns


def child_original(args):
    import resource

    o = load_original(args.tools)
    torch = o.torch
    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    cfg = o.config(args.attention)
    enc = o.build_encoder(cfg)
    n_params = sum(p.numel() for p in {id(p): p for p in enc.parameters()}.values())
    assert not any(type(m).__name__ == "S4D" for m in enc.modules()), "an S4D layer was left in"
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(2, cfg.vocab_size, (1, args.length), generator=g)
    mask = torch.ones(1, args.length, dtype=torch.long)  # always pass it (see the docstring)
    times, foreign, att, ff, cpu = [], [], [], [], []
    with torch.no_grad():
        for _ in range(args.warmup):
            enc(input_ids=ids, attention_mask=mask, return_dict=True)
        for _ in range(args.runs):
            o.SelfAttentionSublayer.timers["attention"] = 0.0
            o.ff_time["ff"] = 0.0
            with ForeignLoad() as fl:
                out = enc(input_ids=ids, attention_mask=mask, return_dict=True).last_hidden_state
            times.append(fl.wall)
            foreign.append(round(fl.frac, 3))
            cpu.append(round(fl.own_cpu, 2))
            att.append(o.SelfAttentionSublayer.timers["attention"])
            ff.append(o.ff_time["ff"])
            assert out.shape == (1, args.length, cfg.d_model) and torch.isfinite(out).all()
    clean = [t for t, f in zip(times, foreign) if f < 0.05]
    med = statistics.median(clean) if clean else statistics.median(times)
    return {"side": "original", "attention": args.attention, "length": args.length,
            "threads": torch.get_num_threads(), "torch": torch.__version__, "locost_commit": refenv_head(o.locost_dir),
            "encoder_params": n_params, "runs_s": [round(t, 3) for t in times], "median_s": med,
            "clean_runs": len(clean), "tokens_per_s": args.length / med,
            "attention_s": statistics.median(att), "ff_s": statistics.median(ff),
            "foreign_cpu_frac_per_run": foreign, "cpu_s_per_run": cpu, "warmup": args.warmup,
            "ru_maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def refenv_head(path):
    try:
        return subprocess.check_output(["git", "-C", path, "rev-parse", "HEAD"], text=True).strip()
    except Exception:
        return "unknown"


def child_selftest(args):
    """(1) OriginalLocalAttention == the original's dense LongT5Attention restricted to the band
    |i - j| <= local_radius (same weights, relative bias over L x L, -1e10 outside the band), for a
    length that is a multiple of the block and one that is not (padding); (2) what the original
    attention modules do with mask=None versus an all-ones mask; (3) a tiny whole stack of each
    type runs and its output depends only on tokens within the receptive field."""
    o = load_original(args.tools)
    torch, lt = o.torch, o.lt
    torch.manual_seed(0)
    tiny = dict(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, vocab_size=512, local_radius=127)
    res = {"side": "selftest"}
    for n in (512, 300):
        cfg = o.config("local", **tiny)
        loc = o.OriginalLocalAttention(cfg, has_relative_attention_bias=True)
        loc.apply(o.init_fn(cfg))
        loc.drop_global()
        dense = lt.LongT5Attention(cfg, has_relative_attention_bias=True)
        dense.load_state_dict(loc.state_dict())  # q, k, v, o, relative_attention_bias
        tg = lt.LongT5TransientGlobalAttention(cfg, has_relative_attention_bias=True)
        tg.apply(o.init_fn(cfg))
        x = torch.randn(1, n, cfg.d_model)
        ones = torch.ones(1, n, dtype=torch.long)
        with torch.no_grad():
            blocked = lt._get_local_attention_mask(ones, loc.block_len, x.device)
            y_loc = loc(x, mask=blocked)[0]
            i = torch.arange(n)
            band = torch.where((i[None, :] - i[:, None]).abs() <= cfg.local_radius, 0.0, -1e10)[None, None]
            y_dense = dense(x, mask=band)[0]
            y_nomask = loc(x, mask=None)[0]
            t_ones = tg(x, mask=ones)[0]
            try:
                tg_none = float((tg(x, mask=None)[0] - t_ones).abs().max())
            except RuntimeError as err:  # several blocks: the unmasked bias cannot be concatenated
                tg_none = f"error: {str(err)[:120]}"
        res[f"local_vs_dense_band_max_abs_{n}"] = float((y_loc - y_dense).abs().max())
        res[f"local_mask_none_vs_ones_max_abs_{n}"] = float((y_nomask - y_loc).abs().max())
        res[f"tglobal_mask_none_vs_ones_max_abs_{n}"] = tg_none
    for att in ATTENTIONS:
        cfg = o.config(att, **tiny)
        enc = o.build_encoder(cfg)
        n = 1024
        ids = torch.randint(2, cfg.vocab_size, (1, n))
        ids2 = ids.clone()
        ids2[0, -1] = (ids[0, -1] + 1) % cfg.vocab_size  # change the last token only
        with torch.no_grad():
            a = enc(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
            b = enc(input_ids=ids2, attention_mask=torch.ones_like(ids)).last_hidden_state
        changed = ((a - b).abs().amax(-1)[0] > 0).nonzero().flatten()
        # local, 2 layers, radius 127: only the last 2*127 + 1 positions may move; transient-global: all
        res[f"{att}_first_position_changed_by_last_token"] = int(changed.min()) if len(changed) else None
    ok = all(res[f"local_vs_dense_band_max_abs_{n}"] < 1e-4 for n in (512, 300))
    ok = ok and res["local_first_position_changed_by_last_token"] == 1024 - 1 - 2 * 127
    ok = ok and res["transient-global_first_position_changed_by_last_token"] == 0
    res["ok"] = ok
    return res


# ----------------------------------------------------------------------------------------------
# parent side (stdlib only)


def run_original(a, L, att):
    cmd = ["/usr/bin/python3", os.path.abspath(__file__), "--child", "original", "--length", str(L),
           "--attention", att, "--runs", str(a.runs), "--warmup", str(a.warmup), "--tools", a.tools]
    r = run_timed(cmd, env=bench_env(a.ref_root))
    line = [x for x in r["stdout"].splitlines() if x.startswith("RESULT ")]
    if r["rc"] != 0 or not line:
        raise SystemExit(f"original failed (rc {r['rc']}):\n{r['stderr_tail']}")
    res = json.loads(line[-1][7:])
    res.update(peak_rss_mib=r.get("peak_rss_mib"), process_wall_s=r["wall_s"], foreign=r["foreign_frac"],
               cmd="env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/time -v " + " ".join(cmd))
    return res


def model_for(a, att, tmp):
    """Our checkpoint directory for attention type `att` (see the docstring)."""
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    if cfg.get("encoder_attention_type") == att:
        return a.model, cfg
    # The two attention types store different tensors (LocalSelfAttention vs
    # TransientGlobalSelfAttention), so the other type is a demo checkpoint of its own.
    d = a.model.rstrip("/") + "-" + att
    if not os.path.exists(os.path.join(d, "config.json")):
        cmd = [a.locost, "demo-checkpoint", "--family", "longt5", "--config", "base", "--encoder-attention-type", att, "--out", d]
        log("making our demo checkpoint:", " ".join(cmd))
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed (rc {p.returncode}):\n{p.stderr[-3000:]}")
    return d, json.load(open(os.path.join(d, "config.json")))


def run_ours(a, L, att, tmp):
    model, cfg = model_for(a, att, tmp)
    ids_path = os.path.join(tmp, f"ids_{L}.json")
    if not os.path.exists(ids_path):
        rng = random.Random(L)
        with open(ids_path, "w") as f:
            json.dump([rng.randrange(2, int(cfg.get("vocab_size", BASE["vocab_size"]))) for _ in range(L)], f)
    out = os.path.join(tmp, f"out_{L}.safetensors")
    cmd = [a.locost, "encode", "--model", model, "--ids", ids_path, "--out", out, "--threads", str(THREADS)]
    r = run_timed(cmd, env=bench_env())
    if os.path.exists(out):
        os.remove(out)
    m = re.search(r"encoded (\d+) x (\d+) tokens in ([\d.]+) s: (\d+) tokens/s, peak memory ([\d.]+) GB", r["stderr_tail"])
    if r["rc"] != 0 or not m:
        raise SystemExit(f"locost encode failed (rc {r['rc']}):\n{r['stderr_tail']}")
    return {"side": "ours", "attention": att, "length": L, "tokens_per_s": float(m.group(4)),
            "encode_s": float(m.group(3)), "tool_peak_gb": float(m.group(5)),
            "process_tokens_per_s": L / r["wall_s"], "peak_rss_mib": r.get("peak_rss_mib"),
            "process_wall_s": r["wall_s"], "foreign": r["foreign_frac"],
            "cmd": "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/time -v " + " ".join(cmd)}


def ensure_model(a):
    if os.path.exists(os.path.join(a.model, "config.json")):
        return
    cmd = [a.locost, "demo-checkpoint", "--family", "longt5", "--config", "base", "--out", a.model]
    log("making our demo checkpoint:", " ".join(cmd))
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (rc {p.returncode}):\n{p.stderr[-3000:]}")


def wait_quiet(max_wait_s, threshold=0.08, probe_s=5.0, probes=3):
    """Waits (up to max_wait_s) until other processes used < threshold of the machine's CPU
    capacity in `probes` consecutive probes of probe_s seconds; returns what it saw."""
    t0 = time.time()
    while True:
        fracs = []
        for _ in range(probes):
            b0 = cpu_busy_s()
            time.sleep(probe_s)
            fracs.append((cpu_busy_s() - b0) / (probe_s * (os.cpu_count() or 1)))
        if max(fracs) < threshold or time.time() - t0 > max_wait_s:
            return {"waited_s": round(time.time() - t0, 1), "load_frac": round(max(fracs), 3),
                    "quiet": max(fracs) < threshold}


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def table(d):
    info = d["machine"]
    L = []
    L.append(f"Machine: {info.get('Model name')}, {info.get('CPU(s)')} CPUs ({info.get('Hypervisor vendor', 'bare metal')}), "
             f"{info.get('MemTotal')}, SIMD: {info.get('simd')}. Threads: {THREADS} on both sides, fp32, batch 1, "
             "all-ones attention mask; OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset.\n")
    L.append("Original: the LOCOST repository's LOCOSTStack + LongT5 layers (its LongT5TransientGlobalAttention; "
             "local = that class without the global side keys: the repository has no local-attention class), "
             "LongT5-tglobal-base shape, random weights (original init), torch.no_grad(), median of the timed runs. "
             "Ours: `locost encode` on the LongT5 base demo checkpoint (UNTRAINED random weights), one process per "
             "measurement: 'tool' = the tokens/s the tool reports for the encode, 'process' = L / whole-process wall time.\n")
    L.append("| L | attention | original tok/s (median s) | original attention / FF s | ours tool tok/s (encode s) | "
             "ours process tok/s | tool / original | process / original | peak RSS original MiB | peak RSS ours MiB | "
             "foreign (original; ours) |")
    L.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for e in d["results"]:
        orig = [r["original"] for r in e["rounds"] if "original" in r]
        ours = [r["ours"] for r in e["rounds"] if "ours" in r]
        o = med(r["tokens_per_s"] for r in orig)
        osec = med(r["median_s"] for r in orig)
        oatt, off = med(r["attention_s"] for r in orig), med(r["ff_s"] for r in orig)
        t = med(r["tokens_per_s"] for r in ours)
        tsec = med(r["encode_s"] for r in ours)
        p = med(r["process_tokens_per_s"] for r in ours)
        orss = med(r["peak_rss_mib"] for r in orig)
        trss = med(r["peak_rss_mib"] for r in ours)
        ratio = (lambda x: f"{x / o:.2f}×" if (o and x) else "-")
        fo = ", ".join(f"{r['foreign']} ({'/'.join(str(x) for x in r['foreign_cpu_frac_per_run'])})" for r in orig) or "-"
        ft = ", ".join(str(r["foreign"]) for r in ours) or "-"
        L.append(f"| {e['length']} | {e['attention']} | {fmt(o, '.0f')} ({fmt(osec, '.2f')}) | "
                 f"{fmt(oatt, '.2f')} / {fmt(off, '.2f')} | {fmt(t, '.0f')} ({fmt(tsec, '.2f')}) | {fmt(p, '.0f')} | "
                 f"{ratio(t)} | {ratio(p)} | {fmt(orss, '.0f')} | {fmt(trss, '.0f')} | {fo}; {ft} |")
    L.append("")
    L.append("'original attention / FF s': time inside the 12 self-attention sublayers / the 12 feed-forward sublayers "
             "of one forward (median). Peak RSS: whole process (`/usr/bin/time -v`; the original's includes Python and "
             "torch, ≈ 300 MiB). Foreign: other processes' share of the machine's CPU during the measurement "
             "(original: whole process, then per timed run).")
    cmds = [r[s]["cmd"] for e in d["results"][:1] for r in e["rounds"][:1] for s in ("original", "ours") if s in r]
    if cmds:
        L.append("\nCommands (first row): " + "; ".join(f"`{c}`" for c in cmds))
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", choices=["original", "selftest"], help="internal: one measurement in this process")
    ap.add_argument("--length", type=int, default=4096, help="child: tokens")
    ap.add_argument("--attention", default=",".join(ATTENTIONS),
                    help="child: local or transient-global; parent: comma list (default both)")
    ap.add_argument("--lengths", default="4096,16384")
    ap.add_argument("--runs", type=int, default=3, help="timed forwards of the original per measurement (median)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed forwards of the original first")
    ap.add_argument("--rounds", type=int, default=1, help="alternations (original, ours) per length and attention")
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "bench"), help="our build dir (bin/locost)")
    ap.add_argument("--locost", default="", help="our CLI binary (default BUILD/bin/locost)")
    ap.add_argument("--model", default=os.path.join(ROOT, "build", "demo-longt5-base"),
                    help="our LongT5 base demo checkpoint (made with demo-checkpoint when missing)")
    ap.add_argument("--ref-root", default=os.environ.get("REF_ROOT", "/tmp/ref"))
    ap.add_argument("--tools", default="/work/shared/tools/original")
    ap.add_argument("--skip-original", action="store_true")
    ap.add_argument("--skip-ours", action="store_true")
    ap.add_argument("--wait-quiet", type=float, default=0, metavar="S",
                    help="before each round wait up to S seconds for the machine to be quiet (0: don't)")
    ap.add_argument("--md", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--from-json", default="", help="only print the table of an earlier --json file")
    a = ap.parse_args()

    if a.child:
        if a.child == "original" and a.attention not in ATTENTIONS:
            raise SystemExit(f"--child original needs --attention {' or '.join(ATTENTIONS)}")
        os.environ.setdefault("REF_ROOT", a.ref_root)
        r = child_original(a) if a.child == "original" else child_selftest(a)
        print("RESULT " + json.dumps(r), flush=True)
        if a.child == "selftest" and not r["ok"]:
            sys.exit(1)
        return
    if a.from_json:
        print(table(json.load(open(a.from_json))))
        return

    lengths = [int(x) for x in a.lengths.split(",")]
    atts = [x.strip() for x in a.attention.split(",") if x.strip()]
    for x in atts:
        if x not in ATTENTIONS:
            raise SystemExit(f"--attention: {x!r} is not one of {', '.join(ATTENTIONS)}")
    a.locost = a.locost or os.path.join(a.build, "bin", "locost")
    a.model = os.path.abspath(a.model)
    if not a.skip_original:
        if not os.path.exists(os.path.join(a.tools, "refenv.py")):
            raise SystemExit(f"{a.tools}/refenv.py not found (the shared tools exist only on dev machines); "
                             "pass --tools or --skip-original")
        if not os.path.isdir(os.path.join(a.ref_root, "locost")):
            raise SystemExit(f"{a.ref_root}/locost missing: run {a.tools}/setup.sh MIRROR_ROOT {a.ref_root} first")
    if not a.skip_ours:
        if not os.access(a.locost, os.X_OK):
            raise SystemExit(f"{a.locost} not found: pass --build/--locost or --skip-ours")
        ensure_model(a)

    d = {"machine": machine(), "args": vars(a), "results": []}
    log("machine", d["machine"])
    with tempfile.TemporaryDirectory() as tmp:
        for L in lengths:
            for att in atts:
                e = {"length": L, "attention": att, "rounds": []}
                d["results"].append(e)
                for rnd in range(a.rounds):
                    row = {}
                    e["rounds"].append(row)
                    if a.wait_quiet:
                        row["quiet_check"] = wait_quiet(a.wait_quiet)
                        log("quiet check", row["quiet_check"])
                    if not a.skip_original:
                        log(f"L={L} {att} round {rnd}: original ({a.runs} runs + {a.warmup} warm-up)")
                        row["original"] = run_original(a, L, att)
                        log({k: v for k, v in row["original"].items() if k != "cmd"})
                    if not a.skip_ours:
                        log(f"L={L} {att} round {rnd}: ours, locost encode")
                        row["ours"] = run_ours(a, L, att, tmp)
                        log({k: v for k, v in row["ours"].items() if k != "cmd"})
                    if a.json:
                        json.dump(d, open(a.json, "w"), indent=1)
    md = table(d)
    print(md)
    if a.md:
        open(a.md, "w").write(md)
    if a.json:
        json.dump(d, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
