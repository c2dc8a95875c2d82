#!/bin/bash
# A/B of a new model's first call, interleaved fresh processes, each with a new
# persistent cache: BASE=<a checkout of main, .venv linked> ab.sh OUT.jsonl CASE...
# (run from this worktree's root; process CPU is the figure to read under load).
here=$(pwd); script="$here/investigations/2026-12-06-first-call-h4/first.py"
out=$1; shift
for rep in 1 2 3; do
  for case in "$@"; do
    for side in base h4; do
      tree=$BASE; [ $side = h4 ] && tree=$here
      d=$(mktemp -d)
      line=$(cd "$tree" && FIXEDOPT_CACHE=$d PYTHONPATH=. .venv/bin/python "$script" "$case" 2>/dev/null | tail -1)
      echo "{\"side\": \"$side\", \"load\": \"$(cut -d' ' -f1 /proc/loadavg)\", \"r\": $line}" >> "$out"
      rm -rf "$d"
    done
  done
done
