#!/bin/bash
# A/B of the first call, interleaved fresh processes: process CPU of a new model's call
# (+ what the ahead threads spent after it) and of a new process's, per tree.
# usage: ab.sh TREE_A TREE_B CASE REPEATS  (prints one JSON line per process)
A=$1; B=$2; CASE=$3; N=${4:-3}
PY=/work/wt/h4/.venv/bin/python
for i in $(seq $N); do
  for T in $A $B; do
    C=$(mktemp -d)
    for ROLE in new again; do
      (cd $T && FIXEDOPT_CACHE=$C PYTHONPATH=$T $PY -m benchmarks.first_call --child $CASE $ROLE --first-only \
        | tail -1 | sed "s|^{|{\"tree\": \"$T\", \"role\": \"$ROLE\", |")
    done
    rm -rf $C
  done
done
