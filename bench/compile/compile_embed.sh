#!/usr/bin/env bash
# What an embedding program pays to compile: examples/embed.cpp alone, with the project's flags
# (-O3 -march=native -fopenmp -std=gnu++20), each timed with its peak compiler memory, then
# linked into a program and run on a tiny demo checkpoint (UNTRAINED weights) made by the
# build's tool. Three ways:
#   header-only       locost/api.hpp is the whole library (no LOCOST_COMPILED)
#   compiled-umbrella LOCOST_COMPILED=1 with locost/locost.hpp: extern template declarations,
#                     every header parsed (embed.cpp's include swapped for the umbrella header)
#   compiled          LOCOST_COMPILED=1 with locost/api.hpp: light declarations only
# No ccache. Usage: bench/compile/compile_embed.sh BUILD_DIR (a configured build whose
# liblocost_compiled.a and bin/locost are built).
set -euo pipefail
build=$(cd "${1:?usage: compile_embed.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)  # the repository (this script is in bench/compile/)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
flags=(-DLOCOST_USE_ONEDNN=1 -DLOCOST_USE_OPENBLAS=1 -I"$src/include" -isystem /usr/include/eigen3 -O3 -DNDEBUG -fopenmp
       -march=native -std=gnu++20)
libs=(-lfftw3f -lsentencepiece -lpcre2-8 -lopenblas -ldnnl -lpthread)
sed 's|#include <locost/api.hpp>|#include <locost/locost.hpp>|' "$src/examples/embed.cpp" > "$out/embed_umbrella.cpp"
"$build/bin/locost" demo-checkpoint --config tiny --seed 5 --out "$out/demo" > /dev/null 2>&1
head -c 2000 "$src/README.md" > "$out/text.txt"
for mode in header-only compiled-umbrella compiled; do
    extra=() source="$src/examples/embed.cpp" link=("$out/embed.o")
    [ "$mode" != header-only ] && extra=(-DLOCOST_COMPILED=1) && link+=("$build/liblocost_compiled.a")
    [ "$mode" = compiled-umbrella ] && source="$out/embed_umbrella.cpp"
    /usr/bin/time -f "%e %M" -o "$out/time" c++ "${flags[@]}" "${extra[@]}" -c "$source" -o "$out/embed.o"
    read -r secs kib < "$out/time"
    c++ -fopenmp "${link[@]}" "${libs[@]}" -o "$out/embed-$mode"
    ran=$("$out/embed-$mode" "$out/demo" "$out/text.txt" > /dev/null 2>&1 && echo ran || echo FAILED)
    printf '%-17s compile %6.1f s  compiler peak %5d MiB  object %6.2f MB  program %5.1f MB  %s\n' "$mode" "$secs" $((kib / 1024)) \
        "$(echo "$(stat -c %s "$out/embed.o") / 1000000" | bc -l)" "$(echo "$(stat -c %s "$out/embed-$mode") / 1000000" | bc -l)" "$ran"
done
