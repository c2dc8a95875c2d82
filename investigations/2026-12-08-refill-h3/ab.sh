#!/bin/bash
# The refill's data moves (docs/decisions.md, "The refill's kernels, data only"): base
# 64f8fb0 (extracted to $BASE) against this tree. Run from the tree's root, the venv's
# python first on PATH: BASE=/path/to/base bash investigations/2026-12-08-refill-h3/ab.sh
set -e
here=$(pwd) dir=investigations/2026-12-08-refill-h3 saved=$(mktemp -d)
# 1. kernels of the solve program (fusions, reduce-windows, dots, instructions)
for case in spot quad64 spectra; do
  bash $dir/count_kernels.sh "$BASE" $case; bash $dir/count_kernels.sh "$here" $case
done
# 2. bits: 27 solves x 2 dtypes, 4 first_call cases, rows-last lanes (a TPU's packing)
for tree in "$BASE" "$here"; do
  (cd "$tree" && PYTHONPATH=. python "$here/$dir/hash_solves.py" && PYTHONPATH=. python \
     "$here/$dir/hash_cases.py" && PYTHONPATH=. python "$here/$dir/minor_check.py")
done
# 3. the solve compiled alone, both modules in one process in turn
for case in spot quad64 spectra; do
  (cd "$BASE" && PYTHONPATH=. python "$here/$dir/compile_parts.py" $case --repeats 1 --save "$saved/base-$case")
  PYTHONPATH=. python $dir/compile_parts.py $case --repeats 1 --save "$saved/tree-$case"
  PYTHONPATH=. python $dir/compile_ab.py "$saved/base-$case" "$saved/tree-$case" jit__solve 5
done
# 4. the first call, fresh processes in turn (labels refill_base<k>, refill<k>)
for k in 1 2; do
  (cd "$BASE" && python -m benchmarks.first_call --first-only --cases spot quad64 --repeats 3 \
     --label "refill_base$k" --out "$here/benchmarks/results")
  python -m benchmarks.first_call --first-only --cases spot quad64 --repeats 3 \
     --label "refill$k" --out benchmarks/results
done
# 5. the compiled call, processes in turn
for _ in 1 2; do
  (cd "$BASE" && PYTHONPATH=. python "$here/$dir/compiled_time.py" spot)
  PYTHONPATH=. python $dir/compiled_time.py spot
done
