#!/bin/bash
# MAIN, BRANCH: two checkouts; PYTHON: the interpreter; run from BRANCH
cd "$BRANCH"
for rep in 1 2 3; do for mode in niced --not-niced; do
  d=$(mktemp -d)
  echo "$rep spectra_slow $mode $(FIXEDOPT_CACHE=$d PYTHONPATH=. "$PYTHON" investigations/2026-12-06-first-call-h7/traces4.py spectra_slow $mode 2>/dev/null | tail -1)"
  rm -rf $d
done; done
