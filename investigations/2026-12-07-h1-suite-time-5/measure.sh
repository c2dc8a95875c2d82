#!/bin/bash
# measure.sh TAG TREE MODULE... : CPU s and programs, fresh persistent cache, appended to $OUT/cost-TAG.jsonl
tag=$1; tree=$2; shift 2
cd $tree && rm -rf .pytest_cache/jax-* && .venv/bin/python -m pytest -q -p no:cacheprovider "$@" --cost-report=$OUT/cost-$tag.jsonl > $OUT/log-$tag.txt 2>&1; tail -1 $OUT/log-$tag.txt; tail -n $# $OUT/cost-$tag.jsonl
