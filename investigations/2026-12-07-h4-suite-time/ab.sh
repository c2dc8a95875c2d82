#!/bin/bash
# Usage: ab.sh BASE_TREE AFTER_TREE TAG MODULES...
# Runs MODULES in BASE_TREE (a checkout of the commit before, with its .venv), then in
# AFTER_TREE, one process each, each tree's persistent cache emptied first; each
# run's cost report goes to cost-<base|after>-TAG.jsonl in the current directory.
base=$1 after=$2 tag=$3 out=$PWD
shift 3
for tree in base after; do
  if [ "$tree" = base ]; then dir=$base; else dir=$after; fi
  (cd "$dir" && rm -rf .pytest_cache/jax-* &&
   .venv/bin/python -m pytest -q -p no:cacheprovider "$@" \
     --cost-report="$out/cost-$tree-$tag.jsonl" | tail -1)
done
