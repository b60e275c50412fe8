#!/usr/bin/env bash
# The C++, CUDA and header sources follow .clang-format (clang-format 14, Debian 12's): any file
# clang-format would change fails the test and is named. Exit 77 (CTest: skipped) where the tree
# is not a git checkout or clang-format is absent, so an unchecked tree is never reported passing.
set -uo pipefail
src=${1:?usage: check_format.sh SOURCE_DIR}
cd "$src" || exit 1
command -v clang-format >/dev/null || { echo "clang-format not installed: skipped"; exit 77; }
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "not a git checkout: skipped"; exit 77; }
mapfile -t files < <(git ls-files '*.hpp' '*.ipp' '*.cpp' '*.cu' '*.cuh' '*.h')
bad=()
for f in "${files[@]}"; do
  [[ -f $f ]] || continue
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
echo "${#files[@]} files checked against .clang-format; ${#bad[@]} would change"
for f in "${bad[@]}"; do echo "  not formatted: $f (clang-format -i $f)"; done
((${#bad[@]} == 0))
