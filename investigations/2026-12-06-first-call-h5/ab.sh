#!/bin/bash
# ab.sh CASE REPS: the base tree ($BASE, e.g. `git archive 7cd84c9 fixedopt benchmarks | tar -x -C $BASE`)
# against this tree ($TREE), interleaved: process CPU of a new model's first call and of a new
# process's (the persistent cache the first left in $OUT/...). PY: the python to run.
HERE=$(cd "$(dirname "$0")" && pwd); TREE=${TREE:-$(cd "$HERE/../.." && pwd)}; OUT=${OUT:-/tmp/ab}; PY=${PY:-python}
case=$1; reps=${2:-3}
for i in $(seq $reps); do
  for tree in main h5; do
    dir=$TREE; [ $tree = main ] && dir=$BASE
    cache=$OUT/$case-$tree-$i; rm -rf $cache
    for role in new again; do
      out=$(cd $dir && PYTHONPATH=. FIXEDOPT_CACHE=$cache $PY $HERE/stages.py $case 2>&1 | grep "process cpu")
      echo "$case $tree $i $role $out"
    done
  done
done
