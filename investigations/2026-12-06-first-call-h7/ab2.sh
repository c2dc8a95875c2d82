#!/bin/bash
# MAIN, BRANCH: two checkouts; PYTHON: the interpreter; run from BRANCH
# main (62233fd, /work/main) against h7, interleaved, fresh processes, each case a new cache
for rep in 1 2 3; do
  for case in spectra spectra_slow models; do
    for tree in "$MAIN" "$BRANCH"; do
      d=$(mktemp -d)
      new=$(cd $tree && PYTHONDONTWRITEBYTECODE=1 FIXEDOPT_CACHE=$d PYTHONPATH=$tree "$PYTHON" "$BRANCH"/investigations/2026-12-06-first-call-h7/traces3.py $case 2>/dev/null | tail -1)
      again=$(cd $tree && PYTHONDONTWRITEBYTECODE=1 FIXEDOPT_CACHE=$d PYTHONPATH=$tree "$PYTHON" "$BRANCH"/investigations/2026-12-06-first-call-h7/traces3.py $case 2>/dev/null | tail -1)
      echo "$rep $case $(basename $tree) NEW $new"
      echo "$rep $case $(basename $tree) AGAIN $again"
      rm -rf $d
    done
  done
done
