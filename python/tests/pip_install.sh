#!/usr/bin/env bash
# `pip install --no-build-isolation .` as the README says a user installs the module: a fresh venv
# over Debian's python3 (its numpy, setuptools and pytest as system packages; nothing from outside
# Debian: --no-index), the install, then the module and the `locost` command used from outside
# the source tree. Then `pip wheel --no-build-isolation .` (the same build tree: no second
# compile), and the wheel installed into a plain venv (no system packages, no numpy), where the
# module summarizes a text and the command runs.
#   pip_install.sh SOURCE_DIR PYTHON TEST_DATA
set -euo pipefail
src=$1 python=$2 data=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m venv --system-site-packages "$work/venv"
# The build's CMake tree goes to the temporary directory, not into the checkout.
(cd "$src" && LOCOST_PYTHON_BUILD_DIR="$work/build" "$work/venv/bin/pip" install --no-build-isolation --no-index --quiet .)
cd "$work"
"$work/venv/bin/python" - "$data" <<'PY'
import os, sys
import locost
where = os.path.dirname(locost.__file__)
assert "site-packages" in where, where
assert os.path.exists(os.path.join(where, "__init__.pyi")) and os.path.exists(os.path.join(where, "py.typed"))
model = locost.Model(os.path.join(sys.argv[1], "hf", "bart"), threads=1)
text = model.summarize("The quick brown fox jumps over the lazy dog.", max_new_tokens=8)
assert isinstance(text, str) and text
print("pip install: locost", locost.__version__, "from", where, "->", repr(text))
PY

printf 'The quick brown fox jumps over the lazy dog.' > "$work/doc.txt"
"$work/venv/bin/locost" --version
"$work/venv/bin/locost" summarize --model "$data/hf/bart" --input "$work/doc.txt" --max-new-tokens 4 --threads 1

(cd "$src" && LOCOST_PYTHON_BUILD_DIR="$work/build" "$work/venv/bin/pip" wheel --no-build-isolation --no-index --no-deps --quiet -w "$work/dist" .)
"$python" -m venv "$work/plain"
"$work/plain/bin/pip" install --no-index --quiet "$work"/dist/locost-*.whl
"$work/plain/bin/python" - "$data" <<'PY'
import os, sys
import locost
assert "numpy" not in sys.modules
model = locost.Model(os.path.join(sys.argv[1], "hf", "bart"), threads=1)
text = model.summarize("The quick brown fox jumps over the lazy dog.", max_new_tokens=8)
ids = model.generate([model.tokenize("The quick brown fox.")], max_new_tokens=4)
assert isinstance(text, str) and text and len(ids[0]) == 5
print("wheel in a plain venv: locost", locost.__version__, "->", repr(text))
PY
"$work/plain/bin/locost" summarize --model "$data/hf/bart" --input "$work/doc.txt" --max-new-tokens 4 --threads 1
