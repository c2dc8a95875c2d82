"""Per case and side (A: before, B: after), every fresh process of ``ab.sh``'s runs:
process CPU and wall of the new model and the new process, the compiled call, and the
caller's ``_solve`` trace/lower/XLA stages: ``python summary.py OUT``."""

import collections
import json
import pathlib
import statistics
import sys

runs = collections.defaultdict(list)
for path in sorted(pathlib.Path(sys.argv[1]).glob("cpu-first_call-*.json")):
    side = path.stem.split("-")[2].lstrip("q")[0]
    for record in json.loads(path.read_text())["records"]:
        for run in record["runs"]:
            runs[record["case"], side].append(run)


def solve_stages(run, key="programs"):
    found = [p for p in run[key] if p["program"] == "_solve" and p["thread"] == "caller"]
    return found[0] if found else None


FIELDS = ("new_model_cpu_s", "new_model_s", "ahead_after_cpu_s", "compiled_s",
          "new_process_cpu_s", "new_process_s")  # fmt: skip
for (case, side), found in sorted(runs.items()):
    line = [f"{case:13s} {side} n={len(found)}"]
    for field in FIELDS:
        values = sorted(r[field] for r in found)
        line.append(f"{field}={statistics.median(values):.2f} [{' '.join(f'{v:.2f}' for v in values)}]")
    stages = [solve_stages(r) for r in found]
    trace = sorted(s["trace"] for s in stages if s)
    line.append(f"solve trace={statistics.median(trace):.2f} [{' '.join(f'{v:.2f}' for v in trace)}]")
    print("\n   ".join(line))
