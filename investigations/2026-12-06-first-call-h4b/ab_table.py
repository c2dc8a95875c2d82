"""ab.sh's JSON lines (stdin) as medians per tree: process CPU of the new model's call,
what the ahead threads spent after it, the new process's call; wall (noise under load);
the covariance program's stages per thread (wall)."""

import collections
import json
import statistics
import sys

runs = collections.defaultdict(list)
for line in sys.stdin:
    if line.startswith("{"):
        r = json.loads(line)
        runs[r["tree"], r["role"]].append(r)
for (tree, role), found in sorted(runs.items()):
    if role == "new":
        keys = ("new_model_cpu_s", "ahead_after_cpu_s", "new_model_s")
    else:
        keys = ("new_process_cpu_s", "new_process_s")
    values = {k: [round(r[k], 2) for r in found] for k in keys}
    print(tree, role, {k: (statistics.median(v), v) for k, v in values.items()})
    listed = "programs" if role == "new" else "again_programs"
    for p in found[0][listed]:
        if p["program"] in ("_rows", "tail", "tail_exported", "_solve", "<lambda>"):
            print("   ", p["program"], p["thread"], p["count"],
                  *(round(p[s], 3) for s in ("trace", "lower", "compile")))
