#!/bin/bash
# The spot's curvature in one kernel (docs/decisions.md), base 35a9a50 (extracted to
# $BASE) against this tree. Run from the tree's root: BASE=/path/to/base bash
# investigations/2026-12-07-curvature-h4/ab.sh PAIRS
# 1. the XLA compile of the spot's solve alone, both modules in one process in turn;
# 2. the first call, fresh processes in turn: labels curv_base<k> and curv<k>;
# 3. the compiled call (process CPU per call, median of 9), processes in turn.
set -e
here=$(pwd) dir=investigations/2026-12-07-curvature-h4 saved=$(mktemp -d)
(cd "$BASE" && PYTHONPATH=. .venv/bin/python "$here/$dir/compile_parts.py" spot --repeats 1 --save "$saved/base")
PYTHONPATH=. .venv/bin/python $dir/compile_parts.py spot --repeats 1 --save "$saved/tree"
PYTHONPATH=. .venv/bin/python $dir/compile_ab.py "$saved/base" "$saved/tree" jit__solve 6
for k in $(seq 1 "${1:-2}"); do
  (cd "$BASE" && .venv/bin/python -m benchmarks.first_call --first-only --cases spot \
     --repeats 2 --label "curv_base$k" --out "$here/benchmarks/results")
  .venv/bin/python -m benchmarks.first_call --first-only --cases spot --repeats 2 \
     --label "curv$k" --out benchmarks/results
done
for _ in 1 2; do
  (cd "$BASE" && PYTHONPATH=. .venv/bin/python "$here/$dir/compiled_time.py" spot)
  PYTHONPATH=. .venv/bin/python $dir/compiled_time.py spot
done
