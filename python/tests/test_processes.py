"""locost in more than one process: multiprocessing's workers (fork) after the parent computed,
each with its own model or with the parent's (fork_safety.hpp says why this once hung).

Run by CTest (test `python`, all of python/tests).
"""
import multiprocessing
import os

import locost
from locost_testing import BART, TEXT

_inherited = None


def _own_model(seed):
    m = locost.Model(BART, threads=2)
    return m.summarize(TEXT, max_new_tokens=6), seed


def _parents_model(seed):
    return _inherited.summarize(TEXT, max_new_tokens=6), seed


def _pool_results(fn):
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        # A timeout rather than a hang: a worker stuck in OpenMP never answers.
        return pool.map_async(fn, [0, 1]).get(timeout=60)


def test_pool_workers_after_the_parent_computed_with_their_own_models():
    global _inherited
    _inherited = locost.Model(BART, threads=2)
    want = _inherited.summarize(TEXT, max_new_tokens=6)
    assert _pool_results(_own_model) == [(want, 0), (want, 1)]
    # The parent computes on afterwards, and a second pool after that works too.
    assert _inherited.summarize(TEXT, max_new_tokens=6) == want
    assert _pool_results(_parents_model) == [(want, 0), (want, 1)]


def test_a_model_loaded_but_never_called_before_the_pool():
    global _inherited
    _inherited = locost.Model(BART, threads=2)  # loading runs parallel loops too
    got = _pool_results(_parents_model)
    assert got[0][0] == got[1][0] == _inherited.summarize(TEXT, max_new_tokens=6)


def _write_t5_with_vocab(src, dst, vocab):
    """A copy of the tiny T5 with a vocabulary of `vocab` rows (tied embeddings): weights of
    vocab × 64 floats, large enough to see in the process's resident memory."""
    import json
    import os
    import struct

    import numpy as np
    from locost_testing import read_safetensors

    tensors = read_safetensors(os.path.join(src, "model.safetensors"))
    tensors["shared.weight"] = np.random.default_rng(0).standard_normal((vocab, 64)).astype(np.float32) * 0.05
    header, blobs, at = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    os.makedirs(dst)
    with open(os.path.join(dst, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg["vocab_size"] = vocab
    json.dump(cfg, open(os.path.join(dst, "config.json"), "w"))


def _resident_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_close_gives_the_models_memory_back(tmp_path):
    import gc
    from locost_testing import HF

    ck = str(tmp_path / "t5-wide")
    _write_t5_with_vocab(os.path.join(HF, "t5_v11"), ck, 400_000)  # 102 MB of float32 embeddings
    gc.collect()
    before = _resident_bytes()
    model = locost.Model(ck, threads=2)
    model.generate([[5, 6, 7, 1]], max_new_tokens=4)
    loaded = _resident_bytes()
    assert loaded - before > 80e6, f"the model added only {(loaded - before) / 1e6:.0f} MB"
    model.close()
    after = _resident_bytes()
    assert after - before < 0.2 * (loaded - before), f"{before / 1e6:.0f} MB, loaded {loaded / 1e6:.0f} MB, closed {after / 1e6:.0f} MB"


def _details(n):
    m = locost.Model(BART, threads=1)
    return m.summarize(TEXT, max_new_tokens=n, details=True), list(m.generate_tokens(TEXT, max_new_tokens=n))


def test_summaries_and_tokens_come_back_from_pool_workers():
    import pickle

    here = locost.Model(BART, threads=1)
    mine = here.summarize(TEXT, max_new_tokens=4, details=True)
    assert pickle.loads(pickle.dumps(mine)) == mine
    tokens = list(here.generate_tokens(TEXT, max_new_tokens=4))
    assert pickle.loads(pickle.dumps(tokens)) == tokens
    (summary, streamed), = _pool_results_of(_details, [4])
    assert (summary.text, summary.ids, summary.input_tokens) == (mine.text, mine.ids, mine.input_tokens)
    assert streamed == tokens


def _pool_results_of(fn, args):
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        return pool.map_async(fn, args).get(timeout=60)


def _in_a_new_process(code, **env):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True, timeout=120)


def test_kernels_reports_the_level_and_a_bad_LOCOST_ISA_is_an_error():
    k = locost.kernels()
    names = {"baseline", "avx2", "avx512", "avx512-vnni", "amx"}
    assert set(k) == {"level", "cpu_level", "compiled_level"}
    assert k["level"] in names and k["cpu_level"] in names and k["compiled_level"] in names
    # LOCOST_ISA is read once per process: lowering it and misspelling it take a new one.
    code = ("import locost\n"
            "try:\n    locost.Model(%r)\nexcept locost.Error as e:\n    print('model', e.id)\n"
            "try:\n    print('kernels', locost.kernels()['level'])\nexcept locost.Error as e:\n    print('kernels', e.id, e.message)\n") % BART
    bad = _in_a_new_process(code, LOCOST_ISA="avx3")
    assert bad.returncode == 0, bad.stderr
    assert bad.stdout.splitlines() == [
        "model isa.unknown_level",
        "kernels isa.unknown_level LOCOST_ISA=avx3: expected one of baseline, avx2, avx512, avx512-vnni, amx"]
    if k["compiled_level"] == "baseline":
        low = _in_a_new_process(code, LOCOST_ISA="baseline")
        assert low.returncode == 0, low.stderr
        assert low.stdout.splitlines()[-1] == "kernels baseline"
