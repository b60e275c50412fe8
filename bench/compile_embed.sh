#!/usr/bin/env bash
# What an embedding program pays to compile: examples/embed.cpp alone, with the project's flags
# (-O3 -march=native -fopenmp -std=gnu++20), header-only and against the compiled library
# (LOCOST_COMPILED=1: extern template declarations), each timed with its peak compiler memory;
# then each object linked into a program. No ccache. Usage: bench/compile_embed.sh BUILD_DIR
# (a configured build whose liblocost_compiled.a is built).
set -euo pipefail
build=$(cd "${1:?usage: compile_embed.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
flags=(-DLOCOST_USE_ONEDNN=1 -DLOCOST_USE_OPENBLAS=1 -I"$src/include" -isystem /usr/include/eigen3 -O3 -DNDEBUG -fopenmp
       -march=native -std=gnu++20)
libs=(-lfftw3f -lsentencepiece -lpcre2-8 -lopenblas -ldnnl -lpthread)
for mode in header-only compiled; do
    extra=()
    [ "$mode" = compiled ] && extra=(-DLOCOST_COMPILED=1)
    /usr/bin/time -f "%e %M" -o "$out/time" c++ "${flags[@]}" "${extra[@]}" -c "$src/examples/embed.cpp" -o "$out/embed.o"
    read -r secs kib < "$out/time"
    link=("$out/embed.o")
    [ "$mode" = compiled ] && link+=("$build/liblocost_compiled.a")
    c++ -fopenmp "${link[@]}" "${libs[@]}" -o "$out/embed-$mode"
    printf '%-12s compile %6.1f s  compiler peak %5d MiB  object %5.1f MB  program %5.1f MB\n' "$mode" "$secs" $((kib / 1024)) \
        "$(echo "$(stat -c %s "$out/embed.o") / 1000000" | bc -l)" "$(echo "$(stat -c %s "$out/embed-$mode") / 1000000" | bc -l)"
done
