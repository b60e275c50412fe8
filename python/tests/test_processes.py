"""locost in more than one process: multiprocessing's workers (fork) after the parent computed,
each with its own model or with the parent's (fork_safety.hpp says why this once hung).

Run by CTest (test `python`, all of python/tests).
"""
import multiprocessing

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
