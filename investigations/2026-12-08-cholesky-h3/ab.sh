#!/bin/bash
# The Cholesky factor by columns (docs/decisions.md, "The spot's Cholesky factor by
# columns (not kept)"): base f1bfa50 (extracted to $BASE) against this tree. Run from
# the tree's root: BASE=/path/to/base bash investigations/2026-12-08-cholesky-h3/ab.sh
set -e
here=$(pwd) dir=investigations/2026-12-08-cholesky-h3 saved=$(mktemp -d)
# 1. the profile: fusions by source frame (each tree), the compile's perf split
python $dir/fusions_by_frame.py spot "$saved/dump_tree"
(cd "$BASE" && python "$here/$dir/fusions_by_frame.py" spot "$saved/dump_base")
(cd "$BASE" && python "$here/$dir/fusions_by_frame.py" quad64 "$saved/dump_q64")
(cd "$BASE" && PYTHONPATH=. python "$here/$dir/compile_parts.py" spot --repeats 1 --save "$saved/base")
PYTHONPATH=. python $dir/compile_parts.py spot --repeats 1 --save "$saved/tree"
(cd "$BASE" && perf record -F 499 -o "$saved/perf.data" -- python "$here/$dir/compile_saved.py" "$saved/base" jit__solve 3)
perf report -i "$saved/perf.data" --no-children --sort sym --stdio > "$saved/perf.txt"
python $dir/perf_split.py "$saved/perf.txt"
# 2. bits: the factor alone, then ~30 solves x 2 dtypes and 4 first_call cases hashed
BASE="$BASE" python $dir/factor_bits.py
for tree in "$BASE" "$here"; do
  (cd "$tree" && PYTHONPATH=. python "$here/$dir/hash_solves.py" && PYTHONPATH=. python "$here/$dir/hash_cases.py")
done
# 3. the spot's solve compiled alone, both modules in one process in turn
PYTHONPATH=. python $dir/compile_ab.py "$saved/base" "$saved/tree" jit__solve 8
# 4. the first call, fresh processes in turn (labels chol_base<k>, chol<k>)
for k in 1 2; do
  (cd "$BASE" && python -m benchmarks.first_call --first-only --cases spot --repeats 3 \
     --label "chol_base$k" --out "$here/benchmarks/results")
  python -m benchmarks.first_call --first-only --cases spot --repeats 3 --label "chol$k" \
     --out benchmarks/results
done
# 5. the compiled call, processes in turn; the rolled solve (roll_above 4) in one process
for _ in 1 2; do
  (cd "$BASE" && PYTHONPATH=. python "$here/$dir/compiled_time.py" spot)
  PYTHONPATH=. python $dir/compiled_time.py spot
done
(cd "$BASE" && PYTHONPATH=. python "$here/$dir/roll_ab.py" spot 3)
# 6. the suite's cost of two modules, trees in turn, a fresh persistent cache each
for tree in "$BASE" "$here" "$BASE" "$here"; do
  (cd "$tree" && rm -rf .pytest_cache/jax-* && python -m pytest -q tests/solvers/test_small_linalg.py \
     tests/driver/test_statuses.py --cost-report="$saved/cost-$(basename "$tree").jsonl")
done
