#!/bin/sh
# ab.sh TAG TREE PYTEST-ARGS...: one measured run in TREE, its line appended to ab.jsonl.
tag=$1; tree=$2; shift 2
out=$(pwd)/ab.jsonl
one=$(mktemp)
(cd "$tree" && rm -rf .pytest_cache/jax-* && .venv/bin/python -m pytest -q -p no:cacheprovider \
    -p no:randomly "$@" --cost-report="$one" > /dev/null 2>&1)
python3 -c "
import json, sys
for line in open(sys.argv[1]):
    cost = json.loads(line); cost['tag'] = sys.argv[2]; print(json.dumps(cost))" "$one" "$tag" >> "$out"
rm -f "$one"
