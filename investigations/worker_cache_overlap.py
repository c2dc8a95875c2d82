"""Would one persistent compilation cache shared by `make test`'s two pytest-xdist
workers save compiles? Reads the two workers' cache folders of a run (conftest.py's
`.pytest_cache/jax-gw0` and `jax-gw1`), counts the programs both compiled (a shared
cache would have compiled each once), and attributes every program to the test modules
its source locations name (JAX keeps them in the serialized executable; a cache entry
is a zlib-compressed 4-byte compile time in whole seconds, then the executable).

    python investigations/worker_cache_overlap.py FOLDER_GW0 FOLDER_GW1 [--since HH:MM]
"""

import argparse
import collections
import datetime
import pathlib
import re
import zlib

SOURCE = re.compile(rb"(?:tests|benchmarks|notebooks)/[\w/]*\.py|fixedopt/testing\w*[\w/]*\.py")


def entries(folder: pathlib.Path, since: datetime.datetime | None) -> dict[str, pathlib.Path]:
    found = {}
    for path in folder.glob("*-cache"):
        written = datetime.datetime.fromtimestamp(path.stat().st_mtime)
        if since is None or written >= since:
            found[path.name] = path
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs=2, type=pathlib.Path)
    parser.add_argument("--since", help="only entries written from this time (HH:MM today)")
    args = parser.parse_args()
    since = None
    if args.since:
        hour, minute = map(int, args.since.split(":"))
        since = datetime.datetime.now().replace(hour=hour, minute=minute, second=0)
    first, second = (entries(folder, since) for folder in args.folders)
    common = first.keys() & second.keys()
    print(f"programs: {len(first)} and {len(second)}, compiled by both workers: {len(common)}")
    seconds, programs = collections.Counter(), collections.Counter()
    for path in [*first.values(), *second.values()]:
        raw = zlib.decompress(path.read_bytes())
        modules = sorted({m.decode() for m in SOURCE.findall(raw)})
        tests = [m for m in modules if m.startswith("tests/") and m != "tests/helpers.py"]
        owner = ",".join(tests) or ",".join(modules) or "(no source named)"
        seconds[owner] += int.from_bytes(raw[:4], "big")
        programs[owner] += 1
    print("stored compile s  programs  module(s)")
    for owner, total in seconds.most_common(25):
        print(f"{total:16d}  {programs[owner]:8d}  {owner[:110]}")


if __name__ == "__main__":
    main()
