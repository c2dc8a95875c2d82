#!/bin/sh
# The first call of the spot and quad n = 64 in fresh processes, a base tree and this
# one in turn (A B A B): sh ab.sh BASE_TREE OUT_DIR, from this tree's root. Then the
# fusions of each tree's programs by source frame (fusions_by_frame.py).
base=$1; out=$2; here=$(pwd); mkdir -p "$out"
for turn in 1 2; do
  (cd "$base" && .venv/bin/python -m benchmarks.first_call --repeats 3 --cases spot quad64 \
     --first-only --label "base$turn" --out "$out")
  (cd "$here" && .venv/bin/python -m benchmarks.first_call --repeats 3 --cases spot quad64 \
     --first-only --label "words$turn" --out "$out")
done
for tree in "$base" "$here"; do
  for case in spot quad64; do
    (cd "$tree" && .venv/bin/python "$here/investigations/2026-12-07-packing-h4/fusions_by_frame.py" "$case")
  done
done
