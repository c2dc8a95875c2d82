"""``python -m benchmarks.xdist_balance REPORT [--workers 2] [--out FILE]``: how long
``make test``'s workers would take in two orders of its modules, predicted from the
module times of one full run (a model: it assumes a module takes as long whatever runs
beside it).

``REPORT`` is what ``pytest -n 2 --dist loadfile --durations=0`` printed. Each module's
seconds (setup, calls and teardown of its tests) are summed, and the modules are handed
out, one at a time, to whichever worker is free first (xdist's ``loadfile`` hands the
next module to a worker about to run out):

- ``most tests first``: xdist's own order (``--loadscope-reorder``, its default);
- ``longest first`` (a ``conftest.py`` that sorts the items, with
  ``--no-loadscope-reorder``; tried on 2026-12-03 and not kept: see
  ``benchmarks/results/cpu-xdist-balance-2026-12-03.md``);
- the sum over the workers: no order does better.

Prints a markdown table (written to ``--out`` too): the longest modules, then the three
finishing times.
"""

from __future__ import annotations

import argparse
import collections
import heapq
import pathlib
import re

LINE = re.compile(r"\s*([\d.]+)s (setup|call|teardown)\s+(\S+?)::\S+")


def module_seconds(report: str) -> tuple[dict[str, float], collections.Counter[str]]:
    """Seconds and test count of each module in a ``--durations=0`` report."""
    seconds: dict[str, float] = collections.defaultdict(float)
    tests: collections.Counter[str] = collections.Counter()
    for line in report.splitlines():
        if match := LINE.match(line):
            seconds[match[3]] += float(match[1])
            tests[match[3]] += match[2] == "call"
    return dict(seconds), tests


def finish(order: list[str], seconds: dict[str, float], workers: int) -> float:
    """When the last of ``workers`` finishes, each taking the next module when free."""
    free = [0.0] * workers
    for module in order:
        heapq.heapreplace(free, free[0] + seconds[module])
    return max(free)


def table(seconds: dict[str, float], tests: collections.Counter[str], workers: int) -> str:
    longest = sorted(seconds, key=lambda m: -seconds[m])
    most_tests = sorted(seconds, key=lambda m: -tests[m])  # stable, as xdist's sort
    lines = ["| module | tests timed | seconds |", "|---|---|---|"]
    lines += [f"| {m} | {tests[m]} | {seconds[m]:.0f} |" for m in longest[:24]]
    lines += ["", f"| order | {workers} workers finish, s |", "|---|---|"]
    lines += [
        f"| most tests first (xdist's default) | {finish(most_tests, seconds, workers):.0f} |",
        f"| longest first | {finish(longest, seconds, workers):.0f} |",
        f"| the sum over the workers | {sum(seconds.values()) / workers:.0f} |",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=pathlib.Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=pathlib.Path)
    args = parser.parse_args()
    text = table(*module_seconds(args.report.read_text()), args.workers)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
