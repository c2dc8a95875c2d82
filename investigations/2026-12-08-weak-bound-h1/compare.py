"""Rows whose status, steps or cost differ between two statuses.py files, and the
flagged rows' before -> after: python compare.py BEFORE.npz AFTER.npz ROW ..."""

import collections
import sys

import numpy as np

a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
print(collections.Counter(a["status"].tolist()), "->", collections.Counter(b["status"].tolist()))
changed = np.flatnonzero((a["status"] != b["status"]) | (a["steps"] != b["steps"])
                         | (a["value"] != b["value"]))  # fmt: skip
print("rows changed", len(changed), changed.tolist(), "steps", a["steps"].sum(), b["steps"].sum())
for i in map(int, sys.argv[3:]):
    drop = 1 - b["value"][i] / a["value"][i]
    print(i, a["status"][i], a["reason"][i], a["steps"][i], "->", b["status"][i], b["reason"][i],
          b["steps"][i], f"deviance {drop:.3g} lower", f"centre {a['popt'][i][1]:.2f} -> "
          f"{b['popt'][i][1]:.2f}")  # fmt: skip
