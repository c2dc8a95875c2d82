#!/bin/bash
# usage: CACHEMODE=fresh|off cache_ab.sh LABEL MODULE...  (from the repository root)
label=$1; shift
if [ "$CACHEMODE" = off ]; then export FIXEDOPT_CACHE=off
else folder=$(mktemp -d); export FIXEDOPT_CACHE=$folder; fi
unset FIXEDOPT_TEST_CACHE
.venv/bin/python -m pytest -q -p no:cacheprovider --cost-report="$label.jsonl" "$@"
[ "$CACHEMODE" = off ] || rm -rf "$folder"
