"""generate_tokens (python/module/stream.hpp): the stream yields what summarize returns, leaving it
early stops the decoding, a closed stream yields nothing more.

Run by CTest (test `python`, all of python/tests); alone: PYTHONPATH=BUILD/python python3 -m pytest python/tests.
"""
import _thread
import os
import threading
import time

import numpy as np
import pytest

import locost
from locost_testing import BART, HF, TEXT


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


def test_a_closed_stream_yields_nothing_more():
    model = locost.Model(BART, threads=1)
    s = model.generate_tokens(TEXT, max_new_tokens=12, min_new_tokens=12)
    next(s)
    s.close()
    with pytest.raises(StopIteration):
        next(s)


T5 = os.path.join(HF, "t5_v11")
IDS = [5, 6, 7, 8, 1]


def test_an_open_stream_decodes_only_as_it_is_read_and_leaves_the_model_to_other_calls():
    model = locost.Model(T5, threads=1)
    want = model.generate([IDS], max_new_tokens=8, min_new_tokens=8)[0]
    # 100000 steps: a stream that decoded ahead would hold the model for minutes.
    s = model.generate_tokens(IDS, max_new_tokens=100000, min_new_tokens=100000)
    first = next(s)
    cpu = time.process_time()
    time.sleep(0.5)
    assert time.process_time() - cpu < 0.2, "the stream decoded while nobody read it"
    start = time.monotonic()
    assert model.generate([IDS], max_new_tokens=8, min_new_tokens=8)[0] == want
    assert time.monotonic() - start < 5
    # ... and the stream goes on where it was, unchanged by the call between its steps.
    rest = [next(s).id for _ in range(7)]
    assert [want[0], first.id] + rest == want
    s.close()


def test_token_logprobs_are_the_scores_of_the_streamed_ids():
    model = locost.Model(T5, threads=1)
    tokens = list(model.generate_tokens(IDS, max_new_tokens=10))
    scored = model.score([IDS], [[t.id for t in tokens]])[0]
    assert scored.shape == (len(tokens),)
    assert np.allclose([t.logprob for t in tokens], scored, atol=1e-4)
    assert all(t.logprob <= 0 for t in tokens)
    # score() is the log-softmax of logits() at the labels.
    dec = [[model.config["decoder_start_token_id"]] + [t.id for t in tokens[:-1]]]
    x = model.logits([IDS], dec)[0].astype(np.float64)
    lsm = x - x.max(-1, keepdims=True)
    lsm -= np.log(np.exp(lsm).sum(-1, keepdims=True))
    assert np.allclose(lsm[np.arange(len(tokens)), [t.id for t in tokens]], scored, atol=1e-5)
    # Rows of different lengths, each its own.
    two = model.score([IDS, IDS[:3]], [[t.id for t in tokens], [t.id for t in tokens[:4]]])
    assert len(two[1]) == 4 and np.allclose(two[0], scored, atol=1e-6) and np.allclose(two[1], model.score([IDS[:3]], [[t.id for t in tokens[:4]]])[0], atol=1e-6)


def _interrupt_after(seconds):
    t = threading.Timer(seconds, _thread.interrupt_main)
    t.start()
    return t


def test_ctrl_c_while_a_call_waits_for_the_model_and_while_a_stream_waits():
    model = locost.Model(T5, threads=1)
    long_ids = [[(i * 7919) % 500 + 2 for i in range(1 << 14)]]
    busy = threading.Thread(target=model.encode, args=(long_ids,))
    start = time.monotonic()
    busy.start()
    time.sleep(0.2)
    # A call waiting for the model's lock hears Ctrl-C.
    t = _interrupt_after(0.3)
    with pytest.raises(KeyboardInterrupt):
        model.generate([IDS], max_new_tokens=4)
    waited = time.monotonic() - start
    t.join()
    # A stream whose worker waits for the model: next() hears Ctrl-C too.
    s = model.generate_tokens(IDS, max_new_tokens=4)
    t = _interrupt_after(0.3)
    with pytest.raises(KeyboardInterrupt):
        next(s)
    t.join()
    heard = time.monotonic() - start
    busy.join()
    encoded = time.monotonic() - start
    assert waited < encoded and heard < encoded, (waited, heard, encoded)
    assert encoded > 1.0, f"the encode took {encoded:.2f} s: too short to show a wait"
    with pytest.raises(StopIteration):
        next(s)  # interrupted: the stream is over
    assert len(model.generate([IDS], max_new_tokens=4)[0]) == 5
