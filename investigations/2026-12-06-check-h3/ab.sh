#!/bin/bash
# The A/B of "The check after the loop with the elemental emitter" (docs/decisions.md).
# A: a copy of the tree before (git archive ff9623d | tar x -C $A); B: this tree. Run from
# each tree's root with PYTHONPATH=. (process CPU: a loaded machine's wall is noise).
A=${A:?the tree before}; B=${B:-$PWD}; HERE=$(cd "$(dirname "$0")" && pwd)
for i in 1 2 3; do for t in "$A" "$B"; do
  (cd "$t" && PYTHONPATH=. python "$HERE/prof.py" quad64 | sed "s#^#$t #")   # per program and stage
  (cd "$t" && PYTHONPATH=. python "$HERE/wait.py" quad64 | sed "s#^#$t #")   # the first call, ahead on
done; done
for t in "$A" "$B"; do (cd "$t" && PYTHONPATH=. python "$HERE/checkvar.py" 2048); done  # compile only
for i in 1 2; do for t in "$A" "$B"; do (cd "$t" && PYTHONPATH=. python "$HERE/speed.py"); done; done
# statuses and steps of status_truth's L-BFGS rows against the committed run (c7560ec):
git show c7560ec:benchmarks/results/cpu-status_truth-2026-12-06.json > /tmp/status_truth.json
PYTHONPATH=. python "$HERE/rows.py" rows.jsonl auto hessian mgh && python "$HERE/cmp.py" rows.jsonl /tmp/status_truth.json
