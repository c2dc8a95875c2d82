import json, sys
ref = json.load(open(sys.argv[2]))
def key(r):
    if r["kind"] == "truth":
        return ("truth", r["solver"], r["problem"], r["dtype"])
    return ("min", r["scaling"], r["problem"], r["start"], r["dtype"], float(r["scale"]))
refs = {key(r): r for r in ref if r.get("kind") in ("truth", "minimize_truth")}
mine = [json.loads(l) for l in open(sys.argv[1])]
same = diff = 0; truthful = {}; reft = {}
for r in mine:
    k = key(r); o = refs[k]
    grp = k[:2]
    truthful[grp] = truthful.get(grp, 0) + r["truthful"]; reft[grp] = reft.get(grp, 0) + o["truthful"]
    if (r["status"], r["steps"]) == (o["status"], o["steps"]):
        same += 1
    else:
        diff += 1; print("DIFF", k, (o["status"], o["steps"]), "->", (r["status"], r["steps"]))
print("rows", len(mine), "same", same, "diff", diff)
for g in truthful: print(g, "truthful", truthful[g], "committed", reft[g])
