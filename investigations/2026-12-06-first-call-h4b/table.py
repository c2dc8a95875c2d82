"""Medians of breakdown.py's JSON lines (stdin) per case, role, program and stage (CPU s)."""

import collections
import json
import statistics
import sys

runs = [json.loads(line) for line in sys.stdin if line.startswith("{")]
groups = collections.defaultdict(list)
for run in runs:
    groups[run["case"], run["role"]].append(run)
for (case, role), found in groups.items():
    print(f"## {case} {role}: {len(found)} runs, cpu median {statistics.median(r['cpu'] for r in found):.2f} s,"
          f" wall {statistics.median(r['wall'] for r in found):.2f}, model traces {found[0]['model_traces']}")
    table = collections.defaultdict(lambda: collections.defaultdict(list))
    counts = collections.Counter()
    for r in found:
        per = collections.defaultdict(lambda: collections.defaultdict(float))
        for name, stage, cpu, wall, thread in r["rows"]:
            per[name][stage] += cpu
            if stage == "trace":
                counts[name] += 1
        per["(after last stage)"]["run"] = r["tail_cpu"]
        for name, stages in per.items():
            for stage in ("trace", "lower", "xla", "run"):
                table[name][stage].append(stages.get(stage, 0.0))
    print("| program | traces | trace | lower | xla | run |\n|---|---:|---:|---:|---:|---:|")
    for name, stages in sorted(table.items(), key=lambda kv: -sum(statistics.median(v) for v in kv[1].values())):
        print(f"| {name} | {counts[name] / len(found):.0f} | " + " | ".join(
            f"{statistics.median(stages[s]):.3f}" for s in ("trace", "lower", "xla", "run")) + " |")
