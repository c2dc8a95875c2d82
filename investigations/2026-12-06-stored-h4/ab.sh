#!/bin/bash
# A/B: base (e581bef) and h4, interleaved; per case: new model (empty cache) then new process.
case=$1; B=$2; reps=${3:-3}
for r in $(seq $reps); do
  for tree in ${BASE:?a checkout of e581bef} ${HERE:?this checkout}; do
    name=$(basename $tree); cache=$(mktemp -d)
    new=$(cd $tree && FIXEDOPT_CACHE=$cache PYTHONPATH=$tree .venv/bin/python $HERE/investigations/2026-12-06-stored-h4/ab_one.py $case $B 2>/dev/null | tail -1)
    again=$(cd $tree && FIXEDOPT_CACHE=$cache PYTHONPATH=$tree .venv/bin/python $HERE/investigations/2026-12-06-stored-h4/ab_one.py $case $B 2>/dev/null | tail -1)
    echo "$case $name rep$r new[cpu after compiled wall]=$new process[...]=$again load=$(cut -d' ' -f1 /proc/loadavg)"
    rm -rf $cache
  done
done
