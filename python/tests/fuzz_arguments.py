"""Fuzzes the Python module's argument conversion (issue 60): random keyword names and values of
every Python type a caller can pass — str with lone surrogates, NUL bytes or megabytes, ints past
64 bits, NaN and infinities, bytes, nested lists, dicts, paths, arbitrary objects — into the calls
that convert them (generation_settings, which reads every generation option as summarize does;
estimate; tokenize; Model's own arguments). Every refusal must be a locost.Error with a stable id
(the module's own: python.*, cli.*, generate.*, config.* ...); anything else — a TypeError, a
RuntimeError, a crash — is a finding, printed with the arguments that caused it.

    PYTHONPATH=BUILD/python python3 python/tests/fuzz_arguments.py [RUNS] [SEED]

CTest's python suite runs a short pass (test_fuzz_arguments in test_arguments.py); the long run is
10^7 executions (bench/RESULTS.md records it).
"""
import math
import os
import pathlib
import random
import sys
import time

import locost

DATA = os.environ.get("LOCOST_TEST_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data"))
BART = os.path.join(DATA, "hf", "bart")

NAMES = ["max_new_tokens", "max_length", "min_new_tokens", "min_length", "num_beams", "length_penalty", "early_stopping",
         "num_return_sequences", "do_sample", "temperature", "top_k", "top_p", "seed", "no_repeat_ngram_size",
         "encoder_no_repeat_ngram_size", "repetition_penalty", "bad_words_ids", "forced_bos_token_id", "forced_eos_token_id",
         "suppress_tokens", "begin_suppress_tokens", "decoder_start_token_id", "eos_token_id", "pad_token_id", "beam_convention",
         "generation_config", "task", "beams", "", "max-new-tokens", "__class__", "x" * 300]


def value(rng, depth=0):
    k = rng.randrange(16)
    if k == 0:
        return rng.choice([0, 1, -1, 2, 5, 2**31, 2**63, -(2**63), 2**64, 10**30, -(10**30)])
    if k == 1:
        return rng.randrange(-10, 4000)
    if k == 2:
        return rng.choice([0.0, -0.0, 0.5, 1.5, -2.5, 1e30, -1e30, 1e-300, math.nan, math.inf, -math.inf, 3e8])
    if k == 3:
        return rng.choice([True, False, None])
    if k == 4:
        return "".join(chr(rng.choice([0x41, 0x20, 0x0, 0xE9, 0x263A, 0xD800, 0xDFFF, 0x1F600, 0x2581, 0x1B, 0x0A]))
                       for _ in range(rng.randrange(0, 12)))
    if k == 5:
        return rng.choice(["true", "false", "never", "hf_4_27", "hf_5", "summarization", "1e30", "[5,7]", "[[5],[7]]", "-1",
                           "nan", "", "\x00", "\ud800", "x" * 100000, "[" * 2000])
    if k == 6:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 8)))
    if k == 7 and depth < 3:
        return [value(rng, depth + 1) for _ in range(rng.randrange(0, 5))]
    if k == 8 and depth < 3:
        return tuple(value(rng, depth + 1) for _ in range(rng.randrange(0, 3)))
    if k == 9 and depth < 3:
        keys = ["k", "max_length", "", "\ud800", 5, -1, 1.5, None, True, ("a", 1)]  # (a dict's keys must hash)
        return {rng.choice(keys): value(rng, depth + 1) for _ in range(rng.randrange(0, 3))}
    if k == 10:
        return pathlib.Path("/tmp") / "x"
    if k == 11:
        return object()
    if k == 12:
        return [rng.randrange(-3, 5000) for _ in range(rng.randrange(0, 6))]
    if k == 13:
        return [[rng.randrange(-3, 5000)] for _ in range(rng.randrange(0, 3))]
    if k == 14:
        return rng.random() * 10
    return rng.randrange(0, 64)


def call(rng, model):
    kind = rng.randrange(10)
    kw = {rng.choice(NAMES): value(rng) for _ in range(rng.randrange(0, 4))}
    if kind < 7:
        return "generation_settings", lambda: model.generation_settings(**kw), kw
    if kind == 7:
        length, batch = value(rng), value(rng)
        return "estimate", lambda: model.estimate(length=length, batch=batch), {"length": length, "batch": batch}
    if kind == 8:
        text = value(rng)
        return "tokenize", lambda: model.tokenize(text), {"text": text}
    path = value(rng)
    return "Model", lambda: locost.Model(path, device=rng.choice(["cpu", "gpu", "", "\ud800"]), threads=value(rng)), {"path": path}


def run(runs, seed, model=None, report=print):
    """Runs `runs` random calls; returns the findings (name, arguments, exception)."""
    rng = random.Random(seed)
    model = model or locost.Model(BART, threads=1)
    findings = []
    for _ in range(runs):
        name, f, args = call(rng, model)
        try:
            f()
        except locost.Error as e:
            if not e.id or "." not in e.id or str(e) != "[locost." + e.id + "] " + e.message:
                findings.append((name, args, e))
        except Exception as e:  # noqa: BLE001 - anything but locost.Error is a finding
            findings.append((name, args, e))
            report(f"finding: {name}({args!r:.300}) raised {type(e).__name__}: {e!s:.300}")
    return findings


if __name__ == "__main__":
    runs = int(float(sys.argv[1])) if len(sys.argv) > 1 else 100000
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    t0 = time.perf_counter()
    found = run(runs, seed)
    print(f"fuzz_arguments: {runs} executions, {len(found)} findings, {time.perf_counter() - t0:.0f} s")
    sys.exit(1 if found else 0)
