"""Fusions of an optimized HLO dump grouped by their innermost fixedopt source lines."""
import re, sys, collections
text = open(sys.argv[1]).read()
depth = int(sys.argv[2]) if len(sys.argv) > 2 else 2
def section(name):
    m = re.search(rf"^{name}\n(.*?)(?:\n\n|\Z)", text, re.S | re.M)
    return m.group(1).splitlines() if m else []
files = {int(a): b.strip('"') for a, b in (l.split(" ", 1) for l in section("FileNames"))}
funcs = {int(a): b.strip('"') for a, b in (l.split(" ", 1) for l in section("FunctionNames"))}
locs = {}
for l in section("FileLocations"):
    i, rest = l.split(" ", 1)
    d = dict(re.findall(r"(\w+)=(\d+)", rest))
    locs[int(i)] = (files[int(d["file_name_id"])], funcs[int(d["function_name_id"])], int(d["line"]))
frames = {}
for l in section("StackFrames"):
    i, rest = l.split(" ", 1)
    d = dict(re.findall(r"(\w+)=(\d+)", rest))
    frames[int(i)] = (int(d["file_location_id"]), int(d["parent_frame_id"]))
def chain(fid):
    out = []
    while fid and fid in frames:
        loc, parent = frames[fid]
        out.append(locs[loc])
        if parent == fid: break
        fid = parent
    return out
count = collections.Counter()
for m in re.finditer(r"^\s+(?:ROOT )?\S+ = \S+ fusion\(.*$", text, re.M):
    s = re.search(r"stack_frame_id=(\d+)", m.group(0))
    c = chain(int(s.group(1))) if s else []
    fx = [f"{f.split('fixedopt/')[-1]}:{ln}({fn.split('.')[-1]})" for f, fn, ln in c if "fixedopt/" in f]
    count[" < ".join(fx[:depth]) or "?"] += 1
for k, v in count.most_common(80):
    print(f"{v:4d} {k}")
print(sum(count.values()))
