"""What the module's calls return (python/module/results.hpp): arrays handed to numpy without a copy.

Run by CTest (test `python`, all of python/tests); alone: PYTHONPATH=BUILD/python python3 -m pytest python/tests.
"""
import os

import numpy as np

import locost
from locost_testing import HF


def test_encode_hands_over_its_array_without_a_copy():
    model = locost.Model(os.path.join(HF, "t5_v11"), threads=1)
    a = model.encode([[5, 6, 7, 1]])
    assert a.dtype == np.float32 and a.shape == (1, 4, 64)
    assert not a.flags["OWNDATA"] and a.base is not None  # a view of the library's tensor, kept alive by the array
    b = model.encode(np.array([[5, 6, 7, 1]], dtype=np.int64))
    assert np.array_equal(a, b)
