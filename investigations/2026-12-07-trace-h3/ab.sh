#!/bin/bash
# A/B of the first call: A = the tree before ($1), B = the tree after ($2, a copy of its
# commit: git archive), interleaved A, B, A, B (ROUNDS), fresh processes (first_call's
# --first-only --repeats 2); results in $3; the cases after ($4 ...). Each side runs from
# its own folder: python -m puts the working folder first on sys.path.
before=$1 after=$2 out=$3 python=${PYTHON:-python}
shift 3
mkdir -p "$out"
for round in $(seq "${ROUNDS:-2}"); do
  for side in A B; do
    if [ $side = A ]; then tree=$before; else tree=$after; fi
    (cd "$tree" && PYTHONPATH=$tree $python -m benchmarks.first_call --first-only --repeats 2 \
      --cases "$@" --label $side$round --out "$out" > "$out/$side$round.log" 2>&1)
  done
done
