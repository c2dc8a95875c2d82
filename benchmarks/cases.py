"""One case: some methods on one problem and size, compiled, timed interleaved, checked.

A case may hold several problems of the same size (the straggler case times the
``quad`` batch and the same batch with one ill-conditioned row together), so that every
ratio the report draws from it comes from one interleaved loop (A B C A B C ...).
"""

from __future__ import annotations

import dataclasses

from benchmarks import timing
from benchmarks.base import Settings, Skipped
from benchmarks.methods import METHODS
from benchmarks.problems import dquad, quad, rosen, straggler
from benchmarks.quality import quality, reference_values
from benchmarks.spectra import spectra

PROBLEMS = {
    "quad": quad,
    "dquad": dquad,
    "rosen": rosen,
    "straggler": straggler,
    "spectra": spectra,
}
SEED = 0


@dataclasses.dataclass(frozen=True)
class Case:
    """Problems (one, or a few timed together) at one size; methods, the reference first."""

    problems: tuple[str, ...]
    batch: int
    n: int
    methods: tuple[str, ...]
    dtype: str = "float64"


@dataclasses.dataclass(frozen=True)
class Repeats:
    """How often to time: compiled methods adapt to their run time, loops are fixed."""

    least: int = 3
    most: int = 7
    seconds: float = 3.0  # per method and case: aim for this much timed work
    loops: int = 3
    slow_s: float = 15.0  # a call slower than this is timed once more only

    def compiled(self, run_s: float) -> int:
        if run_s > self.slow_s:
            return 1
        return max(self.least, min(self.most, int(self.seconds / max(run_s, 1e-6))))


def run_case(case: Case, settings: Settings, repeats: Repeats) -> list[dict]:
    """Compile, time (interleaved) and check every method on every problem of ``case``."""
    problems = {
        name: PROBLEMS[name](case.batch, case.n, SEED, case.dtype) for name in case.problems
    }
    runners, skipped = {}, {}
    for name, problem in problems.items():
        for method in case.methods:
            try:
                runners[name, method] = METHODS[method](problem, settings)
            except Skipped as reason:
                skipped[name, method] = str(reason)
    first, counts = {}, {}
    for key, runner in runners.items():
        if runner.compiles:
            first[key] = timing.first_call(runner.call)
            counts[key] = repeats.compiled(first[key]["first_call_s"] - first[key]["compile_s"])
        else:
            counts[key] = repeats.loops
    times, outputs = timing.interleaved({k: r.call for k, r in runners.items()}, counts)
    records = []
    for name, problem in problems.items():
        reference_key = (name, case.methods[0])
        reference = reference_values(
            problem, runners[reference_key].collect(outputs[reference_key])
        )
        for method in case.methods:
            base = {
                "problem": name,
                "group": "+".join(case.problems),
                "B": case.batch,
                "n": case.n,
                "dtype": case.dtype,
                "method": method,
                "gtol": settings.gtol,
            }
            if (name, method) in skipped:
                records.append(base | {"skipped": skipped[name, method]})
                print(
                    f"{name:>9} B={case.batch:<6} n={case.n:<4} {method:<24} skipped: "
                    f"{skipped[name, method]}",
                    flush=True,
                )
                continue
            runner = runners[name, method]
            result = runner.collect(outputs[name, method])
            record = base | _timing_fields(runner, times[name, method], first.get((name, method)))
            record |= quality(problem, result, reference, settings.gtol)
            records.append(record)
            print(progress(record), flush=True)
    return records


def _timing_fields(runner, times: list[float], first: dict | None) -> dict:
    measured = timing.summary(times)
    scaled = {key: value * runner.scale for key, value in measured.items()}
    return {
        "repeats": len(times),
        **scaled,
        "extrapolated": runner.scale != 1.0,
        "measured_time_median_s": measured["time_median_s"],
        **(first or {"first_call_s": None, "compile_s": 0.0}),
        "memory_bytes": runner.memory(),
        "notes": list(runner.notes),
    }


def progress(r: dict) -> str:
    """One line per record, for the console."""
    mark = "*" if r.get("extrapolated") else " "
    return (
        f"{r['problem']:>9} B={r['B']:<6} n={r['n']:<4} {r['dtype'][-2:]} {r['method']:<24} "
        f"median {r['time_median_s']:8.3f}s{mark} compile {r['compile_s']:6.2f}s  "
        f"steps {r['steps_mean']:7.1f}/{r['steps_max']:<5} conv {r['converged_frac']:.3f}  "
        f"rel Δf {r['max_rel_obj_diff']:.1e}  fixed exact {r['fixed_bit_identical']}"
    )
