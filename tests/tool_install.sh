#!/usr/bin/env bash
# CTest tool_install (tests/tool_install.cmake): the installed locost tool runs on its own.
#   tool_install.sh CMAKE SOURCE_DIR BUILD_DIR
# Installs BUILD_DIR into a scratch prefix under $TMPDIR (or /tmp): outside the source tree and
# outside the build tree, which usually lies inside the source tree. Then, in a private mount
# namespace with an empty tmpfs over the source directory and the build directory, it runs
# PREFIX/bin/locost, found on PATH, from an empty directory:
#   demo-checkpoint --config tiny (the default LOCOST family: the SentencePiece model installed in
#   PREFIX/share/locost) and --family bart (the byte-level BPE vocabulary installed there), then
#   tokenize and summarize --max-new-tokens 4 with each; and, with PREFIX/share/locost moved away,
#   demo-checkpoint must fail with tool.data_not_found naming where it looked.
# It also checks that neither directory's path is compiled into the installed program.
# Exits 77 (CTest: Skipped) with the reason when the isolation cannot be set up (no unshare, or
# no permission to make a mount namespace and mount a tmpfs); any other failure exits 1.
set -euo pipefail
cmake=$1
src=$(realpath "$2")
build=$(realpath "$3")

skip() {
    echo "tool_install: SKIPPED: $*" >&2
    exit 77
}
fail() {
    echo "tool_install: FAILED: $*" >&2
    exit 1
}
inside() { [[ $1 == "$2" || $1 == "$2"/* ]]; }

scratch=
for base in "${TMPDIR:-/tmp}" /tmp; do
    base=$(realpath "$base")
    if ! inside "$base" "$src" && ! inside "$base" "$build"; then
        scratch=$(mktemp -d "$base/locost-tool-install.XXXXXX")
        break
    fi
done
[[ -n $scratch ]] || fail "no scratch directory outside $src and $build (TMPDIR and /tmp are inside them)"
trap 'rm -rf "$scratch"' EXIT
prefix=$scratch/prefix work=$scratch/work
mkdir -p "$work" "$scratch/probe"

command -v unshare >/dev/null || skip "no unshare(1) (util-linux) to hide the source and build trees from the installed tool"
if ! probe=$(unshare --mount --propagation private mount -t tmpfs locost-probe "$scratch/probe" 2>&1); then
    skip "cannot mount a tmpfs in a private mount namespace (unshare --mount: ${probe:-failed}); needs root or CAP_SYS_ADMIN"
fi

"$cmake" --install "$build" --prefix "$prefix" >"$scratch/install.log" 2>&1 || {
    cat "$scratch/install.log" >&2
    fail "cmake --install $build --prefix $prefix"
}
[[ -x $prefix/bin/locost ]] || fail "the installation has no bin/locost"
for f in "$src" "$build"; do
    if grep -qaF "$f/" "$prefix/bin/locost"; then fail "the installed program holds the path $f/: $(grep -aoF "$f/" "$prefix/bin/locost" | head -1)"; fi
done

# Runs in the private mount namespace (a function, so that bash holds all of it in memory before
# the source tree, where this script lives, is covered).
isolated() {
    set -euo pipefail
    local src=$1 build=$2 prefix=$3 work=$4
    cd "$work"  # first: a working directory inside the source tree would still reach it
    mount -t tmpfs -o size=1m,mode=0755 locost-hidden-source "$src"
    [[ $build == "$src" || $build == "$src"/* ]] || mount -t tmpfs -o size=1m,mode=0755 locost-hidden-build "$build"
    [[ -z $(ls -A "$src") && ! -e $build/CMakeCache.txt ]] || { echo "the source or build tree is still visible" >&2; return 1; }
    export PATH=$prefix/bin:$PATH
    [[ $(command -v locost) == "$prefix/bin/locost" ]] || { echo "locost on PATH is $(command -v locost)" >&2; return 1; }
    printf 'It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.\n' >text.txt
    set -x
    locost demo-checkpoint --config tiny --seed 1 --out tiny
    [[ -s tiny/spiece.model && -s tiny/model.safetensors ]]
    cmp tiny/spiece.model "$prefix/share/locost/books-16k.model"
    locost demo-checkpoint --family bart --config tiny --seed 1 --out bart
    cmp bart/vocab.json "$prefix/share/locost/books-bpe/vocab.json"
    cmp bart/merges.txt "$prefix/share/locost/books-bpe/merges.txt"
    for m in tiny bart; do
        locost tokenize --model $m --input text.txt >$m.ids
        grep -qE '^\[[0-9]+(, ?[0-9]+)+\]$' $m.ids
        locost summarize --model $m --input text.txt --max-new-tokens 4 >$m.summary
    done
    # Without its data the tool says where it looked and what to pass instead.
    mv "$prefix/share/locost" "$prefix/share/locost.away"
    local rc=0
    locost demo-checkpoint --config tiny --out nodata 2>nodata.err || rc=$?
    local rc_bpe=0
    locost demo-checkpoint --family bart --config tiny --out nodata 2>nodata-bpe.err || rc_bpe=$?
    mv "$prefix/share/locost.away" "$prefix/share/locost"
    set +x
    cat nodata.err nodata-bpe.err
    [[ $rc == 1 && $rc_bpe == 1 ]]
    grep -qF "locost: [locost.tool.data_not_found] demo-checkpoint: no --spm given" nodata.err
    grep -qF "looked in $prefix/share/locost (from the executable $prefix/bin/locost); pass --spm FILE" nodata.err
    grep -qF "looked in $prefix/share/locost (from the executable $prefix/bin/locost); pass --bpe DIR" nodata-bpe.err
    echo "tool_install: the installed locost ran with $src and $build out of reach"
}
unshare --mount --propagation private bash -c "$(declare -f isolated); isolated \"\$@\"" isolated \
    "$src" "$build" "$prefix" "$work" || fail "the installed tool, run in isolation (commands above)"
