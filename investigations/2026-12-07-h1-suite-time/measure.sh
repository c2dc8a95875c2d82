#!/bin/bash
# measure.sh TAG TREE MODULE... : one module's CPU s and programs, fresh persistent cache,
# into $OUT/cost-TAG.jsonl (run base and change interleaved: before, after, before, after).
tag=$1; tree=$2; shift 2
cd $tree && rm -rf .pytest_cache/jax-* && .venv/bin/python -m pytest -q -p no:cacheprovider "$@" --cost-report=$OUT/cost-$tag.jsonl > $OUT/log-$tag.txt 2>&1; tail -1 $OUT/log-$tag.txt; cat $OUT/cost-$tag.jsonl
