"""The Python module against the same references as the C++ tests: transformers 5.17's outputs in
tests/data/hf for every family and SLED, on the CPU and on the GPU, and the original LOCOST code's
in tests/data/reference (their READMEs say how they were made).

Run by CTest (test `python`, all of python/tests); alone: PYTHONPATH=BUILD/python python3 -m pytest python/tests.
"""
import json
import os

import numpy as np
import pytest

import locost
from locost_testing import DATA, HF, TINY_LOCOST, max_rel, read_safetensors, rows_of


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


def _label_logprobs(logits, labels):
    """log p(labels[b][t]) from the reference logits (batch, T, vocab), in float64."""
    x = logits.astype(np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    lsm = x - np.log(np.exp(x).sum(axis=-1, keepdims=True))
    return [np.take_along_axis(lsm[b], labels[b][:, None].astype(np.int64), axis=-1)[:, 0] for b in range(labels.shape[0])]


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

    logits = model.logits(rows, ref["dec.decoder_input_ids"], prefix_length=prefix)
    assert max_rel(logits, ref["dec.logits"]) < 1e-4
    # score(): log-probabilities of the decoder's next ids, as transformers' logits give them
    # (log_softmax in float64, then the label's entry).
    dec = ref["dec.decoder_input_ids"]
    got = model.score(rows, [list(r[1:]) for r in dec], prefix_length=prefix)
    want = _label_logprobs(ref["dec.logits"][:, :-1], dec[:, 1:])
    assert all(np.max(np.abs(g - w)) < 1e-4 * max(1.0, float(np.max(np.abs(w)))) for g, w in zip(got, want))

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
    logits = model.logits(ref["dec.enc_input_ids"], ref["dec.decoder_input_ids"])
    assert max_rel(logits, ref["dec.logits"]) < 1e-4
    assert model.generate(ref["greedy.enc_input_ids"], max_new_tokens=16) == ref["greedy.sequence"].tolist()
