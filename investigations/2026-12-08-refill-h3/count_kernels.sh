#!/bin/bash
# The kernels of a first_call case's solve program: bash count_kernels.sh TREE CASE
# (fusions, and the reduce-windows and dots XLA:CPU leaves outside fusions).
set -e
dump=$(mktemp -d)
(cd "$1" && FIXEDOPT_CACHE=$(mktemp -d) XLA_FLAGS="--xla_dump_to=$dump --xla_dump_hlo_as_text" \
  PYTHONPATH=. python -m benchmarks.first_call --child "$2" size > /dev/null)
g=$(ls "$dump"/*jit__solve.cpu_after_optimizations.txt)
echo "$1 $2 fusions $(grep -c ' fusion(' "$g")" \
  "reduce-window $(grep -cE '^\s+(ROOT )?%\S+ = \S+ reduce-window\(' "$g")" \
  "dot $(grep -cE '^\s+(ROOT )?%\S+ = \S+ dot\(' "$g")" \
  "instructions $(grep -cE '^\s+(ROOT )?%' "$g")"
