"""The A/B table of ab.sh's output: python table.py OUT.jsonl."""
import json, sys, statistics, collections
rows = [json.loads(l) for l in open(sys.argv[1])]
by = collections.defaultdict(list)
for r in rows: by[r["r"]["case"], r["side"]].append(r)
print("| case | side | first-call CPU s (each) | + ahead after | total median | compiled call CPU s | hash | loads |")
print("|---|---|---|---|---:|---:|---|---|")
for (case, side), rs in by.items():
    f = [x["r"]["first_cpu"] for x in rs]; a = [x["r"]["after_cpu"] for x in rs]
    tot = statistics.median(x + y for x, y in zip(f, a))
    run = statistics.median(x["r"]["run_cpu"] for x in rs)
    print(f"| {case} | {side} | {', '.join(f'{v:.2f}' for v in f)} | {', '.join(f'{v:.2f}' for v in a)} | {tot:.2f} | {run:.3f} | {rs[0]['r']['hash']} | {', '.join(x['load'] for x in rs)} |")
