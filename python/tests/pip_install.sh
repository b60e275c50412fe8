#!/usr/bin/env bash
# `pip install --no-build-isolation .` as the README says a user installs the module: a fresh venv
# over Debian's python3 (its numpy, setuptools and pytest as system packages; nothing from outside
# Debian: --no-index), the install, then the module used from outside the source tree.
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
