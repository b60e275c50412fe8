"""Python values into the option table (python/module/arguments.hpp): errors carry the library's ids
and messages, arguments Python holds but text cannot, the fuzzer's short pass, and every keyword the
module took before the option table.

Run by CTest (test `python`, all of python/tests); alone: PYTHONPATH=BUILD/python python3 -m pytest python/tests.
"""
import json
import os

import pytest

import locost
from locost_testing import BART, TEXT


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
        "python.bad_argument", "summarize: argument 'num_beams' expects an integer in [1, 2147483647], got 0")
    assert error_of(lambda: model.generate([[0, 5000]], max_new_tokens=4)) == (
        "ids.out_of_vocab", "generate: ids: token id 5000 at [1] is not below the vocabulary size 2000")
    assert error_of(lambda: model.generate([[0, 5]], max_new_tokens=4, num_return_sequences=3))[0] == "generate.invalid_option"
    ident, message = error_of(lambda: model.summarize(TEXT, beams=4))
    assert ident == "python.unknown_argument" and message.startswith("summarize: unknown argument 'beams' (it takes: ")
    assert error_of(lambda: model.summarize("\0binary")) == ("input.not_text", "summarize: text 0: not a text file (a NUL byte at offset 0)")
    assert error_of(lambda: model.encode([[0, 5]], prefix_length=1))[0] == "sled.bad_prefix"
    assert error_of(lambda: locost.Model(BART, device="gpu")) == (
        "python.bad_argument", "Model: argument 'device' expects cpu or cuda, got 'gpu'")
    assert error_of(lambda: locost.Model(BART, weights="int4")) == (
        "python.bad_argument", "Model: argument 'weights' expects float32, bfloat16 or int8, got 'int4'")
    # Refused before loading, with the estimate.
    ident, message = error_of(lambda: locost.Model(BART, memory_budget="1M"))
    assert ident == "memory.over_budget" and "more than the budget of 1.00 MB" in message
    small = locost.Model(BART, memory_budget=10**8)  # the model fits, a large batch does not
    ident, message = error_of(lambda: small.summarize([TEXT] * 200, num_beams=8, max_new_tokens=100))
    assert ident == "memory.over_budget" and message.startswith("summarize: needs an estimated")


def test_sampling_without_a_seed_draws_a_fresh_one():
    # Two unseeded samples differ (transformers' and CTranslate2's behaviour); a seed repeats.
    model = locost.Model(BART, threads=1)
    # (The tiny model's distributions are peaked: two samples of it can agree by chance, so a
    # flatter temperature and four draws, which all agree only if the seed is not fresh.)
    kw = dict(max_new_tokens=16, min_new_tokens=16, do_sample=True, top_k=0, temperature=2.0)
    assert len({model.summarize(TEXT, **kw) for _ in range(4)}) > 1
    assert model.summarize(TEXT, seed=0, **kw) == model.summarize(TEXT, seed=0, **kw)


def test_errors_are_also_the_builtin_exception_of_their_kind():
    # A caller that catches ValueError, TypeError, OSError or MemoryError catches locost's too,
    # and each is still a locost.Error with its id.
    model = locost.Model(BART, threads=1)
    cases = [
        (lambda: model.summarize(TEXT, num_beams=0), locost.ArgumentError, ValueError, "python.bad_argument"),
        (lambda: model.summarize("\0binary"), locost.ArgumentError, ValueError, "input.not_text"),
        (lambda: model.generate([[0, 5]], max_new_tokens=4, num_return_sequences=3), locost.ArgumentError, ValueError,
         "generate.invalid_option"),
        (lambda: model.summarize(TEXT, beams=4), locost.KeywordError, TypeError, "python.unknown_argument"),
        (lambda: locost.Model("nobody/absent-model"), locost.FileError, OSError, "checkpoint.not_in_cache"),
        (lambda: locost.Model(BART, memory_budget="1M"), locost.OutOfMemoryError, MemoryError, "memory.over_budget"),
    ]
    for call, kind, builtin, ident in cases:
        with pytest.raises(builtin) as err:
            call()
        assert isinstance(err.value, kind) and isinstance(err.value, locost.Error)
        assert err.value.id == ident


# ---- hostile inputs (issue 60) -------------------------------------------------------------------


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


def test_fuzz_arguments():
    """A short pass of fuzz_arguments.py (random keyword names and values of every Python type):
    every refusal is a locost.Error with its id; the long run is 10^7 executions."""
    import fuzz_arguments

    findings = fuzz_arguments.run(3000, seed=7, model=locost.Model(BART, threads=1), report=lambda line: None)
    assert not findings, findings[:5]


# ---- the option table (issue 54) -----------------------------------------------------------------

# Every keyword the module took before the option table, each with a value of the type it takes.
GENERATION_KEYWORDS = dict(
    max_new_tokens=4, max_length=6, min_new_tokens=1, min_length=2, num_beams=2, length_penalty=0.5, early_stopping=True,
    num_return_sequences=1, do_sample=True, temperature=0.7, top_k=5, top_p=0.9, seed=3, no_repeat_ngram_size=2,
    encoder_no_repeat_ngram_size=3, repetition_penalty=1.2, bad_words_ids=[[5], [7, 8]], forced_bos_token_id=3,
    forced_eos_token_id=2, suppress_tokens=[5, 7], begin_suppress_tokens=[9], decoder_start_token_id=2, eos_token_id=2,
    pad_token_id=1, beam_convention="transformers-4.27")


def test_every_generation_keyword_still_works_and_is_shown_where_it_came_from():
    model = locost.Model(BART, threads=1)
    for name, value in GENERATION_KEYWORDS.items():
        settings = model.generation_settings(**{name: value})
        if name in settings:
            # As Python values: the value given (an id list of one id reads as that id).
            want = value[0] if isinstance(value, list) and len(value) == 1 and name.endswith("token_id") else value
            assert settings[name] == want and type(settings[name]) is type(want), (name, settings[name], want)
    assert model.generation_settings(max_new_tokens=4)["max_new_tokens"] == 4
    # do_sample=False is given: it overrides a checkpoint's do_sample.
    assert model.generation_settings(do_sample=False)["do_sample"] is False
    # a generation_config file and a task
    assert model.generation_settings(generation_config=os.path.join(BART, "generation_config.json"))["num_beams"] is not None
    with pytest.raises(locost.Error) as e:
        model.generation_settings(task="no-such-task")
    assert e.value.id == "python.bad_argument" and e.value.message.startswith("generation_settings: argument 'task' names 'no-such-task'")


def test_every_model_keyword_still_works():
    for kw in (dict(weights="int8"), dict(weights="bfloat16"), dict(compute="bf16"), dict(compute="f32"), dict(compute="float32"),
               dict(cross_attention="folded"), dict(cross_cache="int8"), dict(cross_cache="auto"), dict(memory_budget="64G"),
               dict(memory_budget=10**11), dict(threads=1), dict(device="cpu"), dict(conv_mode="exact"), dict(global_tokens=[0]),
               dict(sled=dict(context=32, window_fraction=0.5, encode_prefix=False)), dict(tokenizer=BART)):
        assert locost.Model(BART, **kw).family == "bart", kw
    with pytest.raises(locost.Error) as e:
        locost.Model(BART, compute=4)
    assert (e.value.id, e.value.message) == ("python.bad_argument", "Model: argument 'compute' expects float32, bfloat16 or int8, got 4")
    with pytest.raises(locost.Error) as e:
        locost.Model(BART, sled=dict(window_fraction=0.5))
    assert (e.value.id, e.value.message) == (
        "python.bad_argument", "Model: argument 'sled_window_fraction' applies to SLED: give 'sled_context' too (or use a SLED checkpoint)")


def test_model_docstring_lists_the_tables_options():
    doc = locost.Model.__doc__
    for name in list(GENERATION_KEYWORDS) + ["generation_config", "task", "cross_cache", "conv_mode", "global_tokens", "backbone", "tokenizer"]:
        assert name in doc, name


def test_max_input_tokens_cuts_every_row_keeping_its_closing_eos():
    import numpy as np
    full = locost.Model(BART, threads=1)
    cut = locost.Model(BART, threads=1, max_input_tokens=12)
    ids = full.tokenize(TEXT)
    assert len(ids) > 12 and ids[0] == 0 and ids[-1] == 2  # BART's <s> ... </s>
    by_hand = ids[:11] + [ids[-1]]  # what transformers' truncation=True, max_length=12 gives
    states = cut.encode([ids])
    assert states.shape[1] == 12
    assert np.array_equal(states, full.encode([by_hand]))
    # In a batch, only the longer row is cut.
    both = cut.encode([ids, ids[:5]])
    assert both.shape[1] == 12
    assert np.allclose(both[0], states[0], atol=1e-5) and np.allclose(both[1, :5], full.encode([ids[:5]])[0], atol=1e-5)
    # Text calls: the document cut the same way before encoding.
    assert cut.summarize(TEXT, max_new_tokens=4) == full.decode(full.generate([by_hand], max_new_tokens=4)[0])
    # A question in front counts; one that leaves no room is refused.
    with pytest.raises(locost.Error) as e:
        locost.Model(BART, threads=1, max_input_tokens=3).summarize(TEXT, prefix="What does the fox do?", max_new_tokens=2)
    assert (e.value.id, e.value.message) == (
        "python.bad_argument",
        "summarize: the question in front takes %d of the 3 tokens argument 'max_input_tokens' allows, leaving none for the document"
        % len(full.tokenize("What does the fox do?")))
    with pytest.raises(locost.Error) as e:
        locost.Model(BART, max_input_tokens=0)
    assert e.value.id == "python.bad_argument" and e.value.message.startswith("Model: argument 'max_input_tokens' expects an integer in [1, ")
