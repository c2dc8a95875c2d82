"""XLA's optimized programs of a first_call case, their fusions (kernels) by source frame.

Run from a checkout's root: python fusions_by_frame.py CASE [DUMP_DIR] [--each]
(CASE: a benchmarks.first_call case). Dumps the case's first call (a fresh cache), then
prints per program its fusions grouped by the innermost fixedopt frame of their
metadata, and by fixedopt file; --each lists every fusion with its fixedopt frames."""
import collections
import os
import pathlib
import re
import subprocess
import sys
import tempfile


def frames_of(text):
    """stack_frame_id -> list of (file, function, line), innermost first."""
    section = lambda name: re.search(rf"^{name}\n(.*?)(?:\n\n|\Z)", text, re.S | re.M)
    files = dict(re.findall(r'^(\d+) "(.*)"$', section("FileNames").group(1), re.M))
    funcs = dict(re.findall(r'^(\d+) "(.*)"$', section("FunctionNames").group(1), re.M))
    locs = {i: (files[f], funcs[g], int(line)) for i, f, g, line in re.findall(
        r"^(\d+) \{file_name_id=(\d+) function_name_id=(\d+) line=(\d+)", section("FileLocations").group(1), re.M)}
    parent = {i: (loc, str(int(p) - 1)) for i, loc, p in re.findall(
        r"^(\d+) \{file_location_id=(\d+) parent_frame_id=(\d+)", section("StackFrames").group(1), re.M)}

    def chain(i):
        out = []
        while i in parent:
            loc, p = parent[i]
            out.append(locs[loc])
            i = p
        return out
    return chain


# Where a fusion's code runs, by a frame of its stack (the first that matches).
REGIONS = [("refill: write", "lane_queue.py:_write"),
           ("refill: start", "lane_queue.py:refill:141"),
           ("refill", "lane_queue.py:refill:"),
           ("trip: step", "lanes.py:_advance"),
           ("trip", "lanes.py:_through_the_queue.<locals>.body"),
           ("loop test", "lanes.py:_through_the_queue.<locals>.going"),
           ("loop", "lanes.py:")]


def short(frame):
    file, func, line = frame
    return f"{file.split('fixedopt/')[-1]}:{func}:{line}"


def main():
    case = sys.argv[1]
    args = [a for a in sys.argv[2:] if not a.startswith("--")]
    dump = args[0] if args else tempfile.mkdtemp()
    if not list(pathlib.Path(dump).glob("*after_optimizations.txt")):
        env = dict(os.environ, FIXEDOPT_CACHE=tempfile.mkdtemp(),
                   XLA_FLAGS=f"--xla_dump_to={dump} --xla_dump_hlo_as_text")
        subprocess.run([sys.executable, "-m", "benchmarks.first_call", "--child", case, "size"],
                       env=env, check=True)
    for path in sorted(pathlib.Path(dump).glob("*after_optimizations.txt")):
        text = path.read_text()
        chain = frames_of(text)
        fusions = re.findall(r"^\s+(?:ROOT )?%(\S+) = \S+ fusion\(.*metadata=\{([^}]*)\}", text, re.M)
        total = len(re.findall(r" fusion\(", text))
        print(f"== {path.name}: {total} fusions ({len(fusions)} with metadata)")
        inner, by_file, regions = (collections.Counter() for _ in range(3))
        for name, meta in fusions:
            sid = re.search(r"stack_frame_id=(\d+)", meta)
            ours = [f for f in chain(sid.group(1))] if sid else []
            ours = [f for f in ours if "/fixedopt/" in f[0]]
            key = short(ours[0]) if ours else re.search(r'op_name="([^"]*)"', meta).group(1)
            inner[key] += 1
            by_file[ours[0][0].split("fixedopt/")[-1] if ours else "?"] += 1
            whole = " < ".join(short(f) for f in ours)
            region = next((r for r, mark in REGIONS if mark in whole), "outside the loop")
            regions[region] += 1
            if "--each" in sys.argv:
                print(f"  {name}: [{region}] {' < '.join(short(f) for f in ours[:6])}")
        for key, n in regions.most_common():
            print(f"  {n:4d}  {key}")
        print("  -- file")
        for key, n in by_file.most_common():
            print(f"  {n:4d}  {key}")
        print("  -- innermost frame")
        for key, n in inner.most_common():
            print(f"  {n:4d}  {key}")


main()
