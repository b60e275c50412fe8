"""generate_tokens (python/module/stream.hpp): the stream yields what summarize returns, leaving it
early stops the decoding, a closed stream yields nothing more.

Run by CTest (test `python`, all of python/tests); alone: PYTHONPATH=BUILD/python python3 -m pytest python/tests.
"""
import os
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
