import collections
import glob
import gzip
import json
import sys

f = glob.glob(sys.argv[1] + "/plugins/profile/*/perfetto_trace.json.gz")[0]
d = json.load(gzip.open(f))
ev = d["traceEvents"] if isinstance(d, dict) else d
tot = collections.Counter()
cnt = collections.Counter()
for e in ev:
    if e.get("ph") == "X":
        tot[e["name"]] += e.get("dur", 0)
        cnt[e["name"]] += 1
for k, v in tot.most_common(int(sys.argv[2]) if len(sys.argv) > 2 else 40):
    print(f"{v / 1000:8.2f} ms {cnt[k]:6d} {k[:90]}")
