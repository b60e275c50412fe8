"""locost: summarize and question documents far longer than a transformer reads, on the CPU.

    import locost
    model = locost.Model("path/to/checkpoint")          # or "org/name" from the Hugging Face cache
    print(model.summarize(open("book.txt").read(), max_new_tokens=256, num_beams=4))

Model reads any checkpoint the `locost` tool reads (LOCOST, T5, BART, LED, LongT5, Pegasus-X,
SLED over T5 or BART) and takes the tool's options as keyword arguments under transformers'
names. Errors are locost.Error, whose .id is the C++ library's stable error id.
See help(locost.Model).
"""
import os as _os

# OpenMP's threads busy-wait ~300K iterations at every barrier by default; decoding runs many small
# parallel steps, and with another busy process on the machine a spinning thread waits for one that
# is not running (3x slower per token). The `locost` tool runs with GOMP_SPINCOUNT=10000 for this
# reason, and so does the module, unless the user chose a policy. libgomp reads it when it is
# loaded, with _locost below (a process that loaded it earlier, through torch say, keeps its own).
if "OMP_WAIT_POLICY" not in _os.environ and "GOMP_SPINCOUNT" not in _os.environ:
    _os.environ["GOMP_SPINCOUNT"] = "10000"

from ._locost import (ArgumentError, Error, FileError, KeywordError, Model, OutOfMemoryError, Summary, Token, TokenStream,
                      Tokenizer, __version__, kernels)

__all__ = ["ArgumentError", "Error", "FileError", "KeywordError", "Model", "OutOfMemoryError", "Summary", "Token", "TokenStream",
           "Tokenizer", "__version__", "kernels"]
