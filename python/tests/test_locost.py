"""The Python module against the same references as the C++ tests (transformers 5.17's outputs in
tests/data/hf, the original LOCOST code's in tests/data/reference; their READMEs say how they were
made), and the module's own behaviour: streaming, errors, interruption, the GIL, memory.

Run by CTest (test `python`); alone: PYTHONPATH=BUILD/python python3 -m pytest python/tests.
"""
import _thread
import gc
import json
import os
import struct
import threading
import time

import numpy as np
import pytest

import locost

DATA = os.environ.get("LOCOST_TEST_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data"))
HF = os.path.join(DATA, "hf")
TINY_LOCOST = os.path.join(DATA, "reference", "tiny_locost")

_DTYPES = {"F32": np.float32, "I64": np.int64, "F64": np.float64, "I32": np.int32}


def read_safetensors(path):
    """A safetensors file as {name: numpy array} (little-endian; the reference files' dtypes only)."""
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8 : 8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(blob[8 + n + a : 8 + n + b], dtype=_DTYPES[t["dtype"]]).reshape(t["shape"])
    return out


def max_rel(got, ref, keep=None):
    """max |got - ref| / max |ref| (over the positions `keep` marks)."""
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    assert got.shape == ref.shape
    if keep is not None:
        got, ref = got[keep], ref[keep]
    return float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))


def rows_of(ids, mask):
    return [[int(t) for t, m in zip(r, mr) if m] for r, mr in zip(ids, mask)]


# The references of tests/data/hf: (folder, checkpoint, Model options, prefix length, generation options
# every case adds). BART's cases gave generate() forced_bos_token_id 0 (its generation_config.json has
# only forced_eos_token_id), as the C++ tests pass it too.
SLED = dict(context=32, window_fraction=0.5)
HF_CASES = [
    ("t5_v11", "t5_v11", {}, 0, {}),
    ("t5_v10", "t5_v10", {}, 0, {}),
    ("sled_t5_p0", "t5_v11", {"sled": SLED}, 0, {}),
    ("sled_t5_p6", "t5_v11", {"sled": SLED}, 6, {}),
    ("bart", "bart", {}, 0, {"forced_bos_token_id": 0}),
    ("sled_bart_p0", "bart", {"sled": SLED}, 0, {"forced_bos_token_id": 0}),
    ("sled_bart_p6", "bart", {"sled": SLED}, 6, {"forced_bos_token_id": 0}),
    ("longt5_local", "longt5_local", {}, 0, {}),
    ("longt5_tglobal", "longt5_tglobal", {}, 0, {}),
    ("led_g0", "led_g0", {}, 0, {}),
    ("led_g1", "led_g0", {"global_tokens": [0, 5, 50]}, 0, {}),
    ("pegasus_x", "pegasus_x", {}, 0, {}),
]


def check_against_transformers(name, checkpoint, options, prefix, extra, device):
    ref = read_safetensors(os.path.join(HF, name, "reference.safetensors"))
    with open(os.path.join(HF, name, "cases.json")) as f:
        cases = json.load(f)
    model = locost.Model(os.path.join(HF, checkpoint), threads=2, device=device, **options)
    mask = ref["enc.attention_mask"].astype(bool)
    rows = rows_of(ref["enc.input_ids"], mask)

    states = model.encode(rows, prefix_length=prefix)
    assert states.shape == ref["enc.last_hidden_state"].shape
    assert max_rel(states, ref["enc.last_hidden_state"], mask) < 1e-4

    logits = model.score(rows, ref["dec.decoder_input_ids"], prefix_length=prefix)
    assert max_rel(logits, ref["dec.logits"]) < 1e-4

    runs = {
        "greedy": dict(max_new_tokens=16),
        "greedy_nr": dict(max_new_tokens=16, no_repeat_ngram_size=2, repetition_penalty=1.5),
        "greedy_nr_eos": dict(max_new_tokens=16, no_repeat_ngram_size=2, repetition_penalty=1.5,
                              eos_token_id=cases["greedy_nr_eos"]["settings"]["eos_token_id"]),
        "beam": dict(max_new_tokens=16, num_beams=4, length_penalty=2.0, no_repeat_ngram_size=3, early_stopping=True,
                     num_return_sequences=2),
    }
    for case, kw in runs.items():
        got = model.generate(rows, prefix_length=prefix, **kw, **extra)
        assert got == cases[case]["sequences"], case
    # A 2-D integer array is the same input as its rows (the first row has no padding).
    first = np.array([rows[0]], dtype=np.int32)
    assert model.generate(first, prefix_length=prefix, max_new_tokens=16, **extra) == [cases["greedy"]["sequences"][0]]


@pytest.mark.parametrize("name,checkpoint,options,prefix,extra", HF_CASES, ids=[c[0] for c in HF_CASES])
def test_equals_transformers(name, checkpoint, options, prefix, extra):
    check_against_transformers(name, checkpoint, options, prefix, extra, "cpu")


def gpu_or_skip():
    """Skips (saying why) where device='cuda' cannot run: no GPU, or a module built without the
    CUDA backend; either is refused before anything loads, with its own error."""
    try:
        locost.Model(TINY_LOCOST, device="cuda", threads=1)
    except locost.Error as e:
        if e.id == "device.no_gpu":
            assert e.message.startswith("--device cuda: no CUDA device is available: cudaGetDeviceCount: ")
        else:
            assert (e.id, e.message) == ("device.no_cuda_build",
                                         "device='cuda': this locost Python module was built without the CUDA backend (it runs on the CPU)")
        pytest.skip(f"device='cuda' is refused here: [{e.id}] {e.message}")


# The same references on the GPU (a module built with -DLOCOST_CUDA=ON, on a machine with one).
@pytest.mark.parametrize("name,checkpoint,options,prefix,extra", HF_CASES, ids=[c[0] for c in HF_CASES])
def test_equals_transformers_on_the_gpu(name, checkpoint, options, prefix, extra):
    gpu_or_skip()
    check_against_transformers(name, checkpoint, options, prefix, extra, "cuda")


def test_equals_the_original_locost_code():
    ref = read_safetensors(os.path.join(DATA, "reference", "locost_decoder.safetensors"))
    enc = read_safetensors(os.path.join(DATA, "reference", "locost_encoder.safetensors"))
    model = locost.Model(TINY_LOCOST, threads=2)
    assert model.family == "locost"
    states = model.encode(enc["enc.L100.input_ids"])
    assert max_rel(states, enc["enc.L100.last_hidden_state"]) < 1e-4
    mask = enc["enc.padded.attention_mask"].astype(bool)
    states = model.encode(rows_of(enc["enc.padded.input_ids"], mask))
    assert max_rel(states, enc["enc.padded.last_hidden_state"], mask) < 1e-4
    logits = model.score(ref["dec.enc_input_ids"], ref["dec.decoder_input_ids"])
    assert max_rel(logits, ref["dec.logits"]) < 1e-4
    assert model.generate(ref["greedy.enc_input_ids"], max_new_tokens=16) == ref["greedy.sequence"].tolist()


def test_encode_hands_over_its_array_without_a_copy():
    model = locost.Model(os.path.join(HF, "t5_v11"), threads=1)
    a = model.encode([[5, 6, 7, 1]])
    assert a.dtype == np.float32 and a.shape == (1, 4, 64)
    assert not a.flags["OWNDATA"] and a.base is not None  # a view of the library's tensor, kept alive by the array
    b = model.encode(np.array([[5, 6, 7, 1]], dtype=np.int64))
    assert np.array_equal(a, b)


BART = os.path.join(HF, "bart")
TEXT = "The quick brown fox jumps over the lazy dog, and the dog sleeps on in the afternoon sun. " * 3


def test_summarize_a_text_and_a_batch():
    model = locost.Model(BART, threads=2)
    one = model.summarize(TEXT, max_new_tokens=12)
    assert isinstance(one, str) and one
    # The same text through the batch equals its single run; the tokenizer's ids go in.
    two = model.summarize([TEXT, "Another, shorter document about cats."], max_new_tokens=12)
    assert two[0] == one and isinstance(two[1], str)
    detail = model.summarize(TEXT, max_new_tokens=12, details=True)
    assert detail.text == one
    assert detail.input_tokens == len(model.tokenize(TEXT))
    assert model.generate([model.tokenize(TEXT)], max_new_tokens=12) == [detail.ids]
    assert model.decode(detail.ids) == one
    beams = model.summarize(TEXT, max_new_tokens=12, num_beams=3, num_return_sequences=2, details=True)
    assert len(beams) == 2 and all(b.score is not None for b in beams)
    assert model.summarize([], max_new_tokens=4) == []


def test_summarize_batches_by_length_and_returns_each_texts_own_summary():
    model = locost.Model(BART, threads=2)
    texts = [TEXT[:n] for n in (40, 270, 120, 200, 60, 90)] + ["Another, shorter document about cats."]
    alone = [model.summarize(t, max_new_tokens=12, details=True) for t in texts]
    lengths = [a.input_tokens for a in alone]
    for budget in (2 * max(lengths) - 1, 10**6):  # the longest alone, then one batch of all
        batched = model.summarize(texts, max_new_tokens=12, max_batch_tokens=budget, details=True)
        assert [b.text for b in batched] == [a.text for a in alone]
        assert [b.ids[: len(a.ids)] for a, b in zip(alone, batched)] == [a.ids for a in alone]
    with pytest.raises(locost.Error) as e:
        model.summarize(texts, max_batch_tokens=-1)
    assert e.value.id == "python.bad_argument"
    assert e.value.message == "summarize: max_batch_tokens must be 0 or more, got -1"


def test_generate_tokens_streams_what_summarize_returns():
    model = locost.Model(BART, threads=2)
    for kw in (dict(max_new_tokens=24), dict(max_new_tokens=24, do_sample=True, top_k=20, seed=7)):
        detail = model.summarize(TEXT, details=True, **kw)
        tokens = list(model.generate_tokens(TEXT, **kw))
        assert [t.id for t in tokens] == [i for i in detail.ids[1:]][: len(tokens)]
        assert len(tokens) == len(detail.ids) - 1 or detail.ids[len(tokens) + 1] == model.config["pad_token_id"]
        assert "".join(t.text for t in tokens) == detail.text
        assert [t.step for t in tokens] == list(range(len(tokens)))
        assert tokens[-1].is_last and not any(t.is_last for t in tokens[:-1])
    with pytest.raises(locost.Error) as e:
        model.generate_tokens(TEXT, num_beams=2)
    assert e.value.id == "generate.invalid_option"


def test_leaving_the_stream_early_stops_the_decoding():
    # T5's relative positions set no length limit: 100000 steps would take minutes.
    model = locost.Model(os.path.join(HF, "t5_v11"), threads=2)
    ids = [5, 6, 7, 8, 1]
    start = time.monotonic()
    for i, token in enumerate(model.generate_tokens(ids, max_new_tokens=100000, min_new_tokens=100000)):
        assert token.text == ""  # no tokenizer in this checkpoint
        if i == 3:
            break
    # The worker stopped at its next step and gave the model back.
    assert time.monotonic() - start < 5
    assert model.generate([ids], max_new_tokens=8) == locost.Model(os.path.join(HF, "t5_v11"), threads=2).generate([ids], max_new_tokens=8)
    streamed = [t.id for t in model.generate_tokens(np.array(ids), max_new_tokens=8)]
    assert [0] + streamed == model.generate([ids], max_new_tokens=8)[0][: len(streamed) + 1]


def test_errors_carry_the_librarys_ids_and_messages():
    def error_of(f):
        with pytest.raises(locost.Error) as e:
            f()
        assert str(e.value) == "[locost." + e.value.id + "] " + e.value.message
        return e.value.id, e.value.message

    assert error_of(lambda: locost.Model("/nonexistent/checkpoint")) == (
        "checkpoint.not_a_directory", "/nonexistent/checkpoint: not a directory")
    model = locost.Model(BART, threads=1)
    assert error_of(lambda: model.summarize(TEXT, num_beams=0)) == (
        "cli.bad_value", "summarize: option '--num-beams' expects an integer in [1, 2147483647], got '0'")
    assert error_of(lambda: model.generate([[0, 5000]], max_new_tokens=4)) == (
        "ids.out_of_vocab", "generate: ids: token id 5000 at [1] is not below the vocabulary size 2000")
    assert error_of(lambda: model.generate([[0, 5]], max_new_tokens=4, num_return_sequences=3))[0] == "generate.invalid_option"
    ident, message = error_of(lambda: model.summarize(TEXT, beams=4))
    assert ident == "python.unknown_argument" and message.startswith("summarize: unknown argument 'beams' (it takes: ")
    assert error_of(lambda: model.summarize("\0binary")) == ("input.not_text", "summarize: text 0: not a text file (a NUL byte at offset 0)")
    assert error_of(lambda: model.encode([[0, 5]], prefix_length=1))[0] == "sled.bad_prefix"
    assert error_of(lambda: locost.Model(BART, device="gpu"))[0] == "cli.bad_value"
    assert error_of(lambda: locost.Model(BART, weights="int4")) == (
        "cli.bad_value", "Model: option '--weights' expects float32, bfloat16 or int8, got 'int4'")
    # Refused before loading, with the estimate.
    ident, message = error_of(lambda: locost.Model(BART, memory_budget="1M"))
    assert ident == "memory.over_budget" and "more than the budget of 1.00 MB" in message
    small = locost.Model(BART, memory_budget=10**8)  # the model fits, a large batch does not
    ident, message = error_of(lambda: small.summarize([TEXT] * 200, num_beams=8, max_new_tokens=100))
    assert ident == "memory.over_budget" and message.startswith("summarize: needs an estimated")


def test_estimate_says_what_a_call_needs():
    model = locost.Model(BART, threads=1)
    e = model.estimate(length=100, max_new_tokens=64)
    assert e["length"] == 100 and e["batch"] == 1
    assert {p["name"] for p in e["phases"]} >= {"load", "encode", "decode"}
    assert e["peak_bytes"] == max(p["bytes"] for p in e["phases"]) and e["fits"]
    bigger = model.estimate(length=100, batch=8, max_new_tokens=64, num_beams=4)
    assert bigger["peak_bytes"] > e["peak_bytes"]
    assert model.estimate(TEXT, max_new_tokens=64)["length"] == len(model.tokenize(TEXT))


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


def test_tokenizer_and_help():
    tok = locost.Tokenizer(BART)
    ids = tok.encode("Hello world")
    assert ids[0] == 0 and ids[-1] == 2  # BART's <s> … </s>
    assert tok.decode(ids) == "Hello world"
    assert locost.Model(BART).tokenizer.encode("Hello world") == ids
    doc = locost.Model.__doc__
    assert "max_new_tokens" in doc and "memory_budget" in doc
    assert os.path.exists(os.path.join(os.path.dirname(locost.__file__), "__init__.pyi"))


# ---- hostile inputs (issue 60) -------------------------------------------------------------------

def test_estimate_of_a_length_makes_no_input():
    """estimate(length=N) computes the estimate from the shape: 3e8 tokens is numbers, not 2.4 GB."""
    model = locost.Model(BART, threads=1)
    t0 = time.perf_counter()
    e = model.estimate(length=3e8)
    assert time.perf_counter() - t0 < 2
    assert e["length"] == 300_000_000 and e["batch"] == 1 and e["peak_bytes"] > 1e9
    assert model.estimate(length=10**12, batch=2)["length"] == 10**12
    for bad in (0, -5, 2.5, "10", True, 2**41):
        with pytest.raises(locost.Error) as err:
            model.estimate(length=bad)
        assert err.value.id == "python.bad_argument"
        assert err.value.message == f"estimate: argument 'length' expects an integer in [1, 1099511627776], got {bad!r}"


def test_arguments_python_holds_but_text_cannot_are_errors_that_say_where():
    model = locost.Model(BART, threads=1)
    with pytest.raises(locost.Error) as err:
        model.summarize("abc\ud800def", max_new_tokens=2)
    assert (err.value.id, err.value.message) == (
        "python.bad_argument",
        "summarize: the text: the text holds a lone surrogate at index 3 (U+D800..U+DFFF alone is not Unicode text; "
        "decode bytes with errors='replace')")
    with pytest.raises(locost.Error) as err:
        model.summarize("abc", prefix=5, max_new_tokens=2)
    assert (err.value.id, err.value.message) == ("python.bad_argument", "summarize: argument 'prefix' expects a str, got 5")
    with pytest.raises(locost.Error) as err:
        locost.Model(BART + "\x00/elsewhere")
    assert (err.value.id, err.value.message) == (
        "python.bad_argument", f"Model: argument 'path_or_name': the path holds a NUL character at byte {len(BART)}")
    import pathlib
    assert locost.Model(pathlib.Path(BART), threads=1).family == "bart"


def test_a_closed_stream_yields_nothing_more():
    model = locost.Model(BART, threads=1)
    s = model.generate_tokens(TEXT, max_new_tokens=12, min_new_tokens=12)
    next(s)
    s.close()
    with pytest.raises(StopIteration):
        next(s)


def test_fuzz_arguments():
    """A short pass of fuzz_arguments.py (random keyword names and values of every Python type):
    every refusal is a locost.Error with its id; the long run is 10^7 executions."""
    import fuzz_arguments

    findings = fuzz_arguments.run(3000, seed=7, model=locost.Model(BART, threads=1), report=lambda line: None)
    assert not findings, findings[:5]
