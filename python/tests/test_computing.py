"""Computing (python/module/computing.hpp): Ctrl-C and other signals during an encode, progress
callbacks, two threads on two models (the GIL released), and no memory growing across calls.

Run by CTest (test `python`, all of python/tests); alone: PYTHONPATH=BUILD/python python3 -m pytest python/tests.
"""
import _thread
import gc
import os
import sys
import threading
import time

import numpy as np
import pytest

import locost
from locost_testing import BART, HF, TEXT


def _long_ids(n):
    return np.random.default_rng(0).integers(3, 500, size=(1, n))


LONGT5 = os.path.join(HF, "longt5_local")


def test_ctrl_c_interrupts_a_long_encode_and_leaves_the_model_usable():
    model = locost.Model(LONGT5, threads=1)
    short = model.encode(_long_ids(64))
    ids = _long_ids(1 << 18)  # ~1.1 s on one Zen 5 core; a first call at this length (not warmed)
    timer = threading.Timer(0.3, _thread.interrupt_main)  # as Ctrl-C: the main thread's SIGINT
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        model.encode(ids)
    took = time.monotonic() - start
    timer.join()
    assert took < 0.3 + 1.0, f"the interrupt took {took - 0.3:.2f} s"
    assert np.array_equal(model.encode(_long_ids(64)), short)


# The child of the signal stress: encodes 16K tokens of dense T5 again and again on one thread,
# saying "start N" before each and "interrupted N" or "done N" after; the parent sends SIGINT.
_SIGNAL_CHILD = r"""
import sys, numpy as np, locost
model = locost.Model(sys.argv[1], threads=1)
ids = np.random.default_rng(0).integers(5, 400, size=(1, 16384))
print("ready", flush=True)
for r in range(int(sys.argv[2])):
    print("start", r, flush=True)
    try:
        model.encode(ids)
        print("done", r, flush=True)
    except KeyboardInterrupt:
        print("interrupted", r, flush=True)
"""


def test_signals_at_random_moments_of_an_encode_leave_the_heap_intact():
    # Signals delivered into oneDNN's JIT GEMM corrupted the heap (glibc aborted within 3-10 of
    # these rounds before the module blocked them on its computing threads); oneDNN forced, as
    # the provider most machines get. Another process sends them, as a terminal's Ctrl-C does.
    import random
    import signal
    import subprocess
    import sys

    env = dict(os.environ, LOCOST_GEMM="onednn", PYTHONPATH=os.path.dirname(os.path.dirname(locost.__file__)))
    rounds = 30
    child = subprocess.Popen([sys.executable, "-c", _SIGNAL_CHILD, os.path.join(HF, "t5_v11"), str(rounds)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
        if line != "ready\n":
            err = child.stderr.read()
            if "gemm.provider_unavailable" in err:
                pytest.skip("this build has no oneDNN: " + err.strip().splitlines()[-1])
            pytest.fail(f"the child did not start: {line!r} {err}")
        rng = random.Random(1)
        slowest = 0.0
        for r in range(rounds):
            assert child.stdout.readline() == f"start {r}\n"
            time.sleep(rng.uniform(0.02, 0.6))
            sent = time.monotonic()
            child.send_signal(signal.SIGINT)
            line = child.stdout.readline()
            slowest = max(slowest, time.monotonic() - sent)
            assert line in (f"interrupted {r}\n", f"done {r}\n"), f"round {r}: {line!r}; stderr: {child.stderr.read()}"
        assert child.wait(timeout=60) == 0, child.stderr.read()
        assert slowest < 1.0, f"an interrupt took {slowest:.2f} s"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


T5 = os.path.join(HF, "t5_v11")


def test_ctrl_c_stops_one_layers_attention_midway():
    # Dense attention over 16K tokens: each layer's token mixing runs ~1 s with no progress point
    # in it; the library's interrupt check runs between its pieces of work.
    model = locost.Model(T5, threads=1)
    ids = _long_ids(1 << 14)
    start = time.monotonic()
    full = model.encode(ids)
    layer = (time.monotonic() - start) / 2  # 2 layers
    fired = []

    def progress(phase, done, total):
        if not fired:  # the first report: layer 0 starts
            fired.append(time.monotonic())
            _thread.interrupt_main()

    with pytest.raises(KeyboardInterrupt):
        model.encode(ids, progress=progress)
    took = time.monotonic() - fired[0]
    assert layer > 0.5, f"a layer takes {layer:.2f} s: too short to show an interrupt inside it"
    assert took < min(0.3, layer / 3), f"the interrupt took {took:.2f} s of a {layer:.2f} s layer"
    assert np.array_equal(model.encode(ids), full)


def test_a_progress_callback_sees_the_work_and_may_stop_it():
    model = locost.Model(LONGT5, threads=1)
    seen = []
    model.encode(_long_ids(1 << 16), progress=lambda phase, done, total: seen.append((phase, done, total)))
    assert seen and all(p == "encoding" for p, _, _ in seen) and seen[-1][1] == pytest.approx(seen[-1][2], rel=0.5)

    class Stop(Exception):
        pass

    def stop(phase, done, total):
        raise Stop()

    with pytest.raises(Stop):
        model.encode(_long_ids(1 << 18), progress=stop)
    assert model.encode(_long_ids(8)).shape == (1, 8, 64)


def test_two_threads_on_two_models_overlap():
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs 2 cores")
    models = [locost.Model(LONGT5, threads=1) for _ in range(2)]
    ids = _long_ids(1 << 17)
    for m in models:
        m.encode(_long_ids(1024))
    start = time.monotonic()
    for m in models:
        m.encode(ids)
    serial = time.monotonic() - start
    threads = [threading.Thread(target=m.encode, args=(ids,)) for m in models]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    parallel = time.monotonic() - start
    print(f"two encodes: {serial:.2f} s one after the other, {parallel:.2f} s in two threads")
    assert parallel < 0.75 * serial


def _rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def test_no_memory_leaks_across_100_calls():
    model = locost.Model(BART, threads=1)
    for _ in range(20):
        model.summarize(TEXT, max_new_tokens=8)
        list(model.generate_tokens(TEXT, max_new_tokens=8))
        model.encode([[0, 5, 6, 2]])
    gc.collect()
    before = _rss()
    for _ in range(100):
        model.summarize(TEXT, max_new_tokens=8)
        list(model.generate_tokens(TEXT, max_new_tokens=8))
        model.encode([[0, 5, 6, 2]])
    gc.collect()
    grew = _rss() - before
    assert grew < 4 << 20, f"resident memory grew by {grew / 2**20:.1f} MiB over 100 calls"


def test_progress_is_a_bar_per_phase_on_pythons_stderr(capsys):
    # capsys sees Python's sys.stderr only (what a notebook shows), not the C-level stream.
    pytest.importorskip("tqdm.auto")
    model = locost.Model(LONGT5, threads=1)
    model.generate(_long_ids(4096), max_new_tokens=6, progress=True)
    err = capsys.readouterr().err
    for phase in ("encoding", "cross-attention cache", "decoding"):
        assert phase + ": 100%" in err or phase + ":" in err, (phase, err)
    assert "encoding: 100%" in err and "cross-attention cache: 100%" in err, err


def test_progress_lines_without_tqdm(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # import tqdm.auto fails
    model = locost.Model(LONGT5, threads=1)
    model.generate(_long_ids(4096), max_new_tokens=6, progress=True)
    err = capsys.readouterr().err
    assert "locost: encoding 100.0%\n" in err and "locost: cross-attention cache 100.0%\n" in err, err


def test_progress_by_default_shows_long_calls_to_a_person_and_nothing_else(capsys, monkeypatch):
    model = locost.Model(LONGT5, threads=1)
    ids = _long_ids(1 << 18)
    model.encode(ids[:, :64])
    model.encode(ids)  # not interactive (pytest's stderr is no terminal): nothing
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    model.encode(ids[:, :64])  # short: nothing
    assert capsys.readouterr().err == ""
    start = time.monotonic()
    model.encode(_long_ids(1 << 19))
    took = time.monotonic() - start
    err = capsys.readouterr().err
    if took < 2.5:
        pytest.skip(f"the long encode took {took:.1f} s, under the 2 s a call runs before it shows progress")
    assert "encoding" in err, err


def test_a_book_for_an_all_to_all_encoder_comes_with_its_cost_and_a_hint():
    model = locost.Model(os.path.join(HF, "t5_v11"), threads=1)

    class Stop(Exception):
        pass

    def stop(phase, done, total):
        raise Stop()

    with pytest.warns(UserWarning, match=r"^generate: t5's encoder attends from every token to every other: 20000 tokens are about "
                      r"2\.0e\+11 floating-point operations in its attention alone, 0\.0 hours at 50 GFLOP/s on each of 1 threads .*"
                      r"locost\.Model\(path, sled=dict\(context=512\)\)$"):
        with pytest.raises(Stop):
            model.generate(_long_ids(20000), max_new_tokens=2, progress=stop)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.generate(_long_ids(1000), max_new_tokens=2)  # short: nothing to say
        sled = locost.Model(os.path.join(HF, "t5_v11"), threads=1, sled=dict(context=64))
        with pytest.raises(Stop):
            sled.generate(_long_ids(20000), max_new_tokens=2, progress=stop)  # SLED: linear
