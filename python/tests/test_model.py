"""locost.Model's calls (python/module/model.hpp): summarize, a batch and batches by length,
estimate, and the tokenizer.

Run by CTest (test `python`, all of python/tests); alone: PYTHONPATH=BUILD/python python3 -m pytest python/tests.
"""
import os
import time

import pytest

import locost
from locost_testing import BART, TEXT


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


def test_estimate_says_what_a_call_needs():
    model = locost.Model(BART, threads=1)
    e = model.estimate(length=100, max_new_tokens=64)
    assert e["length"] == 100 and e["batch"] == 1
    assert {p["name"] for p in e["phases"]} >= {"load", "encode", "decode"}
    assert e["peak_bytes"] == max(p["bytes"] for p in e["phases"]) and e["fits"]
    bigger = model.estimate(length=100, batch=8, max_new_tokens=64, num_beams=4)
    assert bigger["peak_bytes"] > e["peak_bytes"]
    assert model.estimate(TEXT, max_new_tokens=64)["length"] == len(model.tokenize(TEXT))


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


def test_tokenizer_and_help():
    tok = locost.Tokenizer(BART)
    ids = tok.encode("Hello world")
    assert ids[0] == 0 and ids[-1] == 2  # BART's <s> … </s>
    assert tok.decode(ids) == "Hello world"
    assert locost.Model(BART).tokenizer.encode("Hello world") == ids
    doc = locost.Model.__doc__
    assert "max_new_tokens" in doc and "memory_budget" in doc
    assert os.path.exists(os.path.join(os.path.dirname(locost.__file__), "__init__.pyi"))


def _with_summarization_settings(tmp_path, params):
    """A copy of the BART checkpoint whose config.json has task_specific_params['summarization']."""
    import json
    import shutil

    d = tmp_path / "bart-task"
    shutil.copytree(BART, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["task_specific_params"] = {"summarization": params}
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


def test_summarize_uses_the_checkpoints_summarization_settings(tmp_path):
    plain = locost.Model(BART, threads=2)
    ck = _with_summarization_settings(tmp_path, {"num_beams": 2, "max_length": 9, "no_repeat_ngram_size": 2, "prefix": "Notes: "})
    model = locost.Model(ck, threads=2)
    assert model.summarize(TEXT) == plain.summarize("Notes: " + TEXT, num_beams=2, max_length=9, no_repeat_ngram_size=2)
    # Arguments still win over the task's settings.
    assert model.summarize(TEXT, num_beams=1) == plain.summarize("Notes: " + TEXT, max_length=9, no_repeat_ngram_size=2)
    settings = model.generation_settings()
    assert (settings["num_beams"], settings["max_length"], settings["no_repeat_ngram_size"]) == (2, 9, 2)
    assert "".join(t.text for t in model.generate_tokens(TEXT, num_beams=1)) == model.summarize(TEXT, num_beams=1)
    # generate() takes ids as transformers' generate() does: no task.
    assert plain.generation_settings()["max_length"] == 20


def test_a_summary_cut_at_the_default_length_says_so_once():
    model = locost.Model(BART, threads=2)
    with pytest.warns(UserWarning, match=r"^summarize: the summary stopped at 19 tokens, transformers' default length \(max_length 20\), "
                      r"which neither the call nor the checkpoint sets; give max_new_tokens for a longer one$"):
        cut = model.summarize(TEXT, min_new_tokens=19)
    assert len(model.tokenize(cut)) > 0
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.summarize(TEXT, min_new_tokens=19)  # said once per model
        locost.Model(BART, threads=1).summarize(TEXT, max_new_tokens=19, min_new_tokens=19)  # a length given: nothing to say


def test_generation_settings_are_python_values():
    model = locost.Model(BART, threads=1)
    s = model.generation_settings(suppress_tokens=[5, 7], temperature=0.5, bad_words_ids=[[3, 4]], eos_token_id=[2, 9])
    assert s["max_length"] == 20 and type(s["max_length"]) is int
    assert s["max_new_tokens"] is None and s["forced_bos_token_id"] is None
    assert s["temperature"] == 0.5 and type(s["repetition_penalty"]) is float
    assert s["do_sample"] is False and s["suppress_tokens"] == [5, 7] and s["bad_words_ids"] == [[3, 4]]
    assert s["eos_token_id"] == [2, 9] and model.generation_settings()["eos_token_id"] == 2


def test_close_and_with_free_the_model():
    with locost.Model(BART, threads=1) as model:
        want = model.summarize(TEXT, max_new_tokens=4)
    with pytest.raises(locost.ArgumentError) as e:
        model.summarize(TEXT, max_new_tokens=4)
    assert (e.value.id, e.value.message) == (
        "python.closed", "summarize: the Model was closed (close(), or the end of its with block); load it again")
    model.close()  # twice: nothing
    s = (m := locost.Model(BART, threads=1)).generate_tokens(TEXT, max_new_tokens=12, min_new_tokens=12)
    next(s)
    m.close()  # stops the open stream first
    with pytest.raises(StopIteration):
        next(s)
    assert locost.Model(BART, threads=1).summarize(TEXT, max_new_tokens=4) == want


def test_model_takes_a_revision_as_from_pretrained(tmp_path, monkeypatch):
    import pathlib
    import shutil

    repo = tmp_path / "hub" / "models--org--bart"
    for ref, commit in (("main", "a" * 40), ("v2", "b" * 40)):
        shutil.copytree(BART, repo / "snapshots" / commit)
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert locost.Model("org/bart", threads=1).path.endswith("a" * 40)
    assert locost.Model("org/bart", revision="v2", threads=1).path.endswith("b" * 40)
    assert locost.Model("org/bart", revision="b" * 40, threads=1).path.endswith("b" * 40)
    assert locost.Model(pathlib.Path(BART), threads=1).family == "bart"
    with pytest.raises(locost.ArgumentError) as e:
        locost.Model(BART, revision="v2")
    assert e.value.id == "python.bad_argument" and "applies to a repository id" in e.value.message
    with pytest.raises(locost.ArgumentError) as e:
        locost.Model("org/bart@v2", revision="v2")
    assert e.value.message == "Model: 'org/bart@v2' names a revision already (org/name@revision): give it once"
    with pytest.raises(locost.FileError) as e:
        locost.Model("org/bart", revision="v3")
    assert e.value.id == "checkpoint.revision_not_in_cache"


def test_model_takes_a_cache_dir_as_from_pretrained(tmp_path, monkeypatch):
    import pathlib
    import shutil

    hub = tmp_path / "elsewhere"
    repo = hub / "models--org--bart"
    shutil.copytree(BART, repo / "snapshots" / ("c" * 40))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("c" * 40)
    # The environment's cache holds nothing: only cache_dir= finds the repository.
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    with pytest.raises(locost.FileError) as e:
        locost.Model("org/bart", threads=1)
    assert e.value.id == "checkpoint.not_in_cache"
    model = locost.Model("org/bart", cache_dir=hub, threads=1)  # an os.PathLike, as open() takes
    assert model.path == str(repo / "snapshots" / ("c" * 40))
    assert model.summarize(TEXT, max_new_tokens=4) == locost.Model(BART, threads=1).summarize(TEXT, max_new_tokens=4)
    assert locost.Model("org/bart", cache_dir=str(hub), revision="c" * 40, threads=1).path == model.path
    # The tokenizer by name too, and a tokenizer= name resolved in the same cache.
    assert locost.Tokenizer("org/bart", cache_dir=hub).encode(TEXT) == locost.Tokenizer(pathlib.Path(BART)).encode(TEXT)
    assert locost.Model(BART, tokenizer="org/bart", cache_dir=hub, threads=1).summarize(TEXT, max_new_tokens=4)
    with pytest.raises(locost.FileError) as e:
        locost.Model("org/bart", cache_dir=tmp_path / "typo")
    assert (e.value.id, e.value.message) == (
        "checkpoint.not_in_cache", f"org/bart: cache_dir '{tmp_path / 'typo'}' is not a directory")
    with pytest.raises(locost.FileError) as e:
        locost.Model("org/absent", cache_dir=hub)
    assert f"the cache is {hub} (cache_dir))" in e.value.message
    with pytest.raises(locost.ArgumentError) as e:
        locost.Model("org/bart", cache_dir=3)
    assert e.value.id == "python.bad_argument"


def test_evaluate_scores_a_data_set_as_locost_eval(tmp_path):
    import json
    import pathlib

    model = locost.Model(BART, threads=1)
    docs = [TEXT, "Another, shorter document about cats and the dogs that chase them."]
    own = model.summarize(docs, max_new_tokens=6)
    # The summaries as their own references: every score is 1 (when the texts hold two words).
    report = model.evaluate(list(zip(docs, own)), max_new_tokens=6, bootstrap_samples=50)
    assert report["documents"] == 2 and report["summarized"] == 2 and report["failed"] == 0
    assert report["summaries"] == own
    assert report["use_stemmer"] is True and report["bootstrap_samples"] == 50
    assert report["speed"]["new_tokens"] > 0 and report["peak_rss_bytes"] > 0
    if all(len(s.split()) >= 2 for s in own):
        assert all(report["rouge"][k]["fmeasure"]["low"] == 1.0 for k in ("rouge1", "rouge2", "rougeL", "rougeLsum"))
    # A JSON-lines file as `locost eval --data` reads it (a str or os.PathLike), dicts, stemmer off.
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"id": i, "document": d, "summary": "zzqx vvkj"}) + "\n" for i, d in enumerate(docs)))
    for given in (data, str(data), [{"document": d, "summary": "zzqx vvkj"} for d in docs]):
        r = model.evaluate(given, max_new_tokens=6, rouge_stemmer="none", bootstrap_samples=20)
        assert r["use_stemmer"] is False and r["rouge"]["rouge1"]["fmeasure"]["high"] == 0.0
        assert r["summaries"] == own
    with pytest.raises(locost.ArgumentError) as e:
        model.evaluate([("only a document",)])
    assert e.value.id == "python.bad_argument" and "expects a (document, reference) pair" in e.value.message
    with pytest.raises(locost.ArgumentError) as e:
        model.evaluate(list(zip(docs, own)), rouge_stemmer="snowball")
    assert e.value.id == "python.bad_argument" and "rouge_stemmer" in e.value.message
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "document": "x"}\n')
    with pytest.raises(locost.ArgumentError) as e:
        model.evaluate(pathlib.Path(bad))
    assert (e.value.id, e.value.message) == ("eval.bad_data", f"{bad}:1: expected a string \"summary\" (the reference)")
