#!/usr/bin/python3
"""Side by side: decoding speed of the ORIGINAL LOCOST model (PyTorch, CPU) against ours, base
size, 2 threads, 32 new tokens after an input of L random token ids (default 4096 and 16384).

For each L, in one session:
  (a) original, greedy:  /usr/bin/time -v python3 BASELINE --child decode --d-state 512
        --length L --new-tokens 32 --nocache-tokens 0   (the shared tools' baseline: the original
        LOCOSTForConditionalGeneration with its past_key_values cache; median step time of steps
        2..32; peak RSS of the process)
  (b) original, beam 4:  /usr/bin/time -v python3 compare_decode.py --child-beam --length L
        the same model driven as Hugging Face 4.27.1's generate drives beam search: the encoder
        output repeated per beam (_expand_inputs_for_generation), each step the model's forward on
        the 4 beams' last tokens with past_key_values, log_softmax + running beam scores, top 2·4
        candidates, the cache reordered with the model's _reorder_cache. BeamSearchScorer's
        finished-hypothesis bookkeeping is left out (it costs microseconds); eos is not special.
  (c) ours:  /usr/bin/time -v bm_decode --benchmark_filter='BM_decode/L:L/beams:B/' (greedy and
        beam 4; median step time of steps 2..32; peak RSS of the process)
and once the machine's read bandwidth (bm_bandwidth, 2 threads, 2 GiB): the read-once time of a
step is (decoder weights + LM head + cross-attention K/V at the cache's precision) / bandwidth.

Models: the original's random base model (original init) and our base demo checkpoint
(`locost demo-checkpoint --config base`): UNTRAINED random weights, the same shapes, so the
timings compare. Needs the shared tools (--tools, with baseline.py) and the original code's clones
(--ref-root, default /tmp/ref) that exist only on this project's development machines.

    /usr/bin/python3 bench/peers/compare_decode.py --md /tmp/decode.md --json /tmp/decode.json
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)  # bench/, which holds the shared timed.py
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
sys.path.insert(0, HERE)
from compare_original import THREADS, bench_json, log, machine, original_env  # noqa: E402
from timed import run_timed  # noqa: E402

NEW_TOKENS = 32
BEAMS = 4


def child_beam(args):
    """Runs in a process of its own: the original model under an HF-style beam loop."""
    sys.path.insert(0, args.tools)
    import refenv  # noqa: F401  (puts the shim and the clones on sys.path)
    import baseline
    import resource

    import torch
    from models import LOCOSTForConditionalGeneration

    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    cfg = baseline.base_config(512)
    model = LOCOSTForConditionalGeneration(cfg).eval()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(2, cfg.vocab_size, (1, args.length), generator=g)
    res = {"mode": "beam", "beams": BEAMS, "length": args.length, "threads": torch.get_num_threads()}
    with torch.no_grad():
        t0 = time.perf_counter()
        enc = model.encoder(input_ids=ids, return_dict=True)
        res["encode_s"] = time.perf_counter() - t0
        enc.last_hidden_state = enc.last_hidden_state.repeat_interleave(BEAMS, dim=0)
        tokens = torch.full((BEAMS, 1), cfg.decoder_start_token_id, dtype=torch.long)
        beam_scores = torch.zeros(BEAMS)
        beam_scores[1:] = -1e9
        past, step_t = None, []
        fl = baseline.ForeignLoad().__enter__()
        for _ in range(NEW_TOKENS):
            t0 = time.perf_counter()
            o = model(encoder_outputs=enc, decoder_input_ids=tokens[:, -1:] if past is not None else tokens,
                      past_key_values=past, use_cache=True, return_dict=True)
            logp = torch.log_softmax(o.logits[:, -1, :], dim=-1) + beam_scores[:, None]
            V = logp.shape[-1]
            top, idx = torch.topk(logp.view(1, -1), 2 * BEAMS, dim=1)
            beam_idx, tok = idx[0, :BEAMS] // V, idx[0, :BEAMS] % V
            beam_scores = top[0, :BEAMS]
            tokens = torch.cat([tokens[beam_idx], tok[:, None]], dim=1)
            past = model._reorder_cache(o.past_key_values, beam_idx)
            step_t.append(time.perf_counter() - t0)
        fl.__exit__()
    res["foreign_cpu_frac"] = round(fl.foreign_frac, 3)
    res["first_step_ms"] = step_t[0] * 1e3
    res["steady_ms_per_token"] = statistics.median(step_t[1:]) * 1e3
    res["ru_maxrss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(res), flush=True)


def result_line(r, what):
    line = [l for l in r["stdout"].splitlines() if l.startswith("RESULT ")]
    if r["rc"] != 0 or not line:
        raise SystemExit(f"{what} failed (rc {r['rc']}):\n{r['stderr_tail']}")
    return json.loads(line[-1][7:])


def original_greedy(a, L):
    cmd = ["/usr/bin/python3", os.path.join(a.tools, "baseline.py"), "--child", "decode", "--d-state", "512", "--length", str(L),
           "--new-tokens", str(NEW_TOKENS), "--nocache-tokens", "0"]
    r = run_timed(cmd, env=original_env(a.ref_root))
    res = result_line(r, "original greedy")
    return {"ms_per_token": res["cached_steady_ms_per_token"], "first_step_ms": res["cached_first_step_ms"],
            "foreign": res["cached_foreign_cpu_frac"], "peak_rss_mib": r.get("peak_rss_mib"), "cmd": " ".join(cmd)}


def original_beam(a, L):
    cmd = ["/usr/bin/python3", os.path.abspath(__file__), "--child-beam", "--length", str(L), "--tools", a.tools]
    r = run_timed(cmd, env=original_env(a.ref_root))
    res = result_line(r, "original beam")
    return {"ms_per_token": res["steady_ms_per_token"], "first_step_ms": res["first_step_ms"], "foreign": res["foreign_cpu_frac"],
            "peak_rss_mib": r.get("peak_rss_mib"), "cmd": " ".join(cmd)}


WEIGHTS_ENV = {"float32": "f32", "bfloat16": "bf16", "int8": "int8"}


def ours(a, L, beams, weights="float32"):
    env = dict(os.environ, LOCOST_BENCH_MODEL=a.model, LOCOST_BENCH_WEIGHTS=WEIGHTS_ENV[weights])
    if a.cross_cache:
        env["LOCOST_BENCH_CROSS_CACHE"] = a.cross_cache
    binary = os.path.join(a.build, "bench", "bm_decode")
    filt = f"BM_decode/L:{L}/beams:{beams}/"
    bms, r = bench_json(binary, filt, env=env)
    b = bms[0]
    return {"ms_per_token": b["ms/token"], "first_step_ms": b["first_step_ms"], "MB_read": b["MB_read"], "cross_MB": b["cross_MB"],
            "precision": b.get("label", ""), "foreign": b["foreign"], "peak_rss_mib": r.get("peak_rss_mib"),
            "weights": weights,
            "cmd": f"LOCOST_BENCH_MODEL={a.model} LOCOST_BENCH_WEIGHTS={WEIGHTS_ENV[weights]}"
                   + (f" LOCOST_BENCH_CROSS_CACHE={a.cross_cache}" if a.cross_cache else "") + f" {binary} --benchmark_filter='{filt}'"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child-beam", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--length", type=int, default=4096, help=argparse.SUPPRESS)
    ap.add_argument("--lengths", default="4096,16384")
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "dev"))
    ap.add_argument("--model", default=os.path.join(ROOT, "build", "demo-base"))
    ap.add_argument("--ref-root", default="/tmp/ref")
    ap.add_argument("--tools", default=os.path.join(os.path.dirname(ROOT), "shared", "tools", "original"))
    ap.add_argument("--weights", default="float32",
                    help="comma-separated precisions of our decoder weights (float32,bfloat16,int8), each run beside the same original run")
    ap.add_argument("--beams", default=f"1,{BEAMS}", help="searches to run: 1 (greedy) and/or 4")
    ap.add_argument("--cross-cache", default="", help="our cross-attention cache precision (f32, bf16, int8; default automatic)")
    ap.add_argument("--md", default="decode.md")
    ap.add_argument("--json", default="decode.json")
    a = ap.parse_args()
    if a.child_beam:
        return child_beam(a)
    info = machine()
    bw, _ = bench_json(os.path.join(a.build, "bench", "bm_bandwidth"), f"BM_read_sum/MiB:2048/threads:{THREADS}/")
    gbs = bw[0]["GB/s"]
    log(f"read bandwidth {gbs:.1f} GB/s")
    rows = []
    for L in [int(x) for x in a.lengths.split(",")]:
        for beams in [int(b) for b in a.beams.split(",")]:
            log(f"L={L} beams={beams}: original")
            orig = original_greedy(a, L) if beams == 1 else original_beam(a, L)
            log(f"  original {orig['ms_per_token']:.1f} ms/token")
            for w in a.weights.split(","):
                mine = ours(a, L, beams, w)
                log(f"  ours ({w} weights) {mine['ms_per_token']:.1f} ms/token")
                rows.append({"L": L, "beams": beams, "original": orig, "ours": mine})
    out = {"machine": info, "read_GBps": gbs, "rows": rows}
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)
    md = [f"Machine: {info.get('Model name')}, {info.get('CPU(s)')} CPUs, SIMD: {info.get('simd')}. Threads: {THREADS}. "
          f"Read bandwidth (bm_bandwidth, 2 threads, 2 GiB): {gbs:.1f} GB/s. {NEW_TOKENS} new tokens; ms/token = median of steps 2..{NEW_TOKENS}.",
          "",
          "| L | search | original ms/token | ours ms/token | speed-up | ours: MB read per step (weights, cache precision) | read-once ms | ours / read-once | peak RSS original MiB | peak RSS ours MiB | foreign (orig, ours) |",
          "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        o, m = r["original"], r["ours"]
        read_ms = m["MB_read"] / gbs  # MB / (GB/s) = ms
        md.append(f"| {r['L']} | {'greedy' if r['beams'] == 1 else 'beam ' + str(r['beams'])} | {o['ms_per_token']:.1f} | {m['ms_per_token']:.1f} | "
                  f"{o['ms_per_token'] / m['ms_per_token']:.2f}× | {m['MB_read']:.0f} ({m['precision']}) | {read_ms:.1f} | {m['ms_per_token'] / read_ms:.2f}× | "
                  f"{o['peak_rss_mib']:.0f} | {m['peak_rss_mib']:.0f} | {o['foreign']:.3f}, {m['foreign']:.3f} |")
    text = "\n".join(md) + "\n"
    with open(a.md, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
