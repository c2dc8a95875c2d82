"""One case: some methods on one problem and size, compiled, timed interleaved, checked.

A case may hold several problems of one size (the straggler case times the ``quad``
batch and the same batch with one ill-conditioned row together), so that every ratio
drawn from it comes from one interleaved loop (A B C A B C ...). Quality is checked
apart from the method: objective and gradient re-evaluated at each method's final ``x``
with the problem's NumPy objective, in float64.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from benchmarks import timing
from benchmarks.methods import METHODS, RowResults, Settings, Skipped
from benchmarks.problems import PROBLEMS, Problem

SEED = 0
AGREE_RTOL = 1e-6


@dataclasses.dataclass(frozen=True)
class Case:
    """Problems (one, or a few timed together) at one size; methods, the reference first.
    ``options``: keywords of the problem's generator (``condition`` of ``illquad``)."""

    problems: tuple[str, ...]
    batch: int
    n: int
    methods: tuple[str, ...]
    dtype: str = "float64"
    options: tuple = ()

    def make(self, name: str) -> Problem:
        return PROBLEMS[name](self.batch, self.n, SEED, self.dtype, **dict(self.options))


@dataclasses.dataclass(frozen=True)
class Repeats:
    """How often to time: compiled methods aim at ``seconds`` of timed work each, a call
    slower than ``slow_s`` once only; the per-row NumPy loops ``loops`` times."""

    least: int = 3
    most: int = 7
    seconds: float = 3.0
    loops: int = 3
    slow_s: float = 15.0

    def compiled(self, run_s: float) -> int:
        if run_s > self.slow_s:
            return 1
        return max(self.least, min(self.most, int(self.seconds / max(run_s, 1e-6))))


def run_case(case: Case, settings: Settings, repeats: Repeats) -> list[dict]:
    """Compile, time (interleaved) and check every method on every problem of ``case``."""
    problems = {name: case.make(name) for name in case.problems}
    runners, skipped, first, counts = {}, {}, {}, {}
    for key in ((name, method) for name in problems for method in case.methods):
        try:
            runners[key] = runner = METHODS[key[1]](problems[key[0]], settings)
        except Skipped as reason:
            skipped[key] = str(reason)
            continue
        counts[key] = repeats.loops
        if runner.compiles:
            first[key] = timing.first_call(runner.call)
            counts[key] = repeats.compiled(first[key]["first_call_s"] - first[key]["compile_s"])
    times, outputs = timing.interleaved({k: r.call for k, r in runners.items()}, counts)
    records, firsts = [], {}
    for name, problem in problems.items():
        base = {"kind": "case", "problem": problem.name, "group": "+".join(case.problems),
                "B": case.batch, "n": case.n, "dtype": case.dtype,
                "gtol": settings.gtol}  # fmt: skip
        reference = None
        for method in case.methods:
            record = base | {"method": method}
            if (name, method) in skipped:
                records.append(record | {"skipped": skipped[name, method]})
                print(f"{name} B={case.batch} n={case.n} {method} skipped: {skipped[name, method]}")
                continue
            runner = runners[name, method]
            result = runner.collect(outputs[name, method])
            record |= measured(
                runner, problem.batch, times[name, method], first.get((name, method))
            )
            reference = reference or (result, record["time_median_s"])
            record |= quality(problem, result, reference[0], settings.gtol)
            record["time_vs_reference"] = record["time_median_s"] / reference[1]
            if len(problems) > 1 and record["rows_solved"] == case.batch:
                firsts.setdefault(method, record["time_median_s"])
                record["time_vs_first_problem"] = record["time_median_s"] / firsts[method]
            records.append(record)
            print(progress(record), flush=True)
    return records


def measured(runner, batch: int, times: list[float], first: dict | None) -> dict:
    """Times scaled from the rows solved to the batch, compile time, memory, notes."""
    rows = runner.rows or batch
    return {
        "repeats": len(times),
        "rows_solved": rows,
        **{key: value * batch / rows for key, value in timing.summary(times).items()},
        **(first or {"first_call_s": None, "compile_s": 0.0}),
        "memory_bytes": runner.memory(),
        "notes": list(runner.notes),
    }


def evaluate(problem: Problem, result: RowResults):
    """The objective and the max |projected gradient| on free entries of each row."""
    x = np.asarray(result.x, np.float64)
    if problem.numpy_fun is None:
        return np.asarray(result.value), np.full(len(x), np.nan)
    values, grad = problem.numpy_fun(x, *problem.args)
    if problem.bounds is not None:
        grad = x - np.clip(x - grad, *problem.bounds)
    return values, np.max(np.where(problem.fixed, 0.0, np.abs(grad)), axis=-1, initial=0.0)


def fixed_bit_identical(problem: Problem, x: np.ndarray) -> bool:
    """Whether every fixed entry of ``x`` has exactly the bits of ``x0`` in ``x``'s dtype."""
    got = np.ascontiguousarray(x[problem.fixed])
    want = problem.x0[problem.fixed].astype(got.dtype)
    return bool(np.array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{got.itemsize}")))


def quality(problem: Problem, result: RowResults, reference: RowResults, gtol: float) -> dict:
    """Steps, convergence, agreement with the reference on the (first) rows both solved,
    and exactness of fixed entries."""
    solved = problem.rows(len(result.value))
    values, norms = evaluate(solved, result)
    ref_values, _ = evaluate(problem.rows(len(reference.value)), reference)
    both = min(len(values), len(ref_values))
    scale = np.maximum(np.abs(ref_values[:both]), 1.0)
    relative = np.abs(values[:both] - ref_values[:both]) / scale
    with np.errstate(invalid="ignore"):
        lower = values[:both] < ref_values[:both] - AGREE_RTOL * scale
    return {
        "steps_mean": float(np.mean(result.steps)),
        "steps_max": int(np.max(result.steps)),
        "converged_frac": float(np.mean(result.converged)),
        "gtol_met_frac": float(np.mean(norms <= gtol)),
        "max_rel_obj_diff": float(np.max(relative, initial=0.0)),
        "rows_agree_frac": float(np.mean(relative <= AGREE_RTOL)),
        "rows_lower_frac": float(np.mean(lower)),  # clearly lower f than the reference
        "rows_other_steps": int(np.sum(result.steps[:both] != reference.steps[:both])),
        "fixed_bit_identical": fixed_bit_identical(solved, result.x),
    }


def progress(r: dict) -> str:
    """One line per record, for the console."""
    return (
        f"{r['problem']} B={r['B']} n={r['n']} {r['dtype']} {r['method']}: median "
        f"{r['time_median_s']:.3g} s ({r['rows_solved']} rows), compile {r['compile_s']:.2f} s, "
        f"steps {r['steps_mean']:.1f}/{r['steps_max']}, converged {r['converged_frac']:.3f}, "
        f"rel Δf {r['max_rel_obj_diff']:.1e}, fixed exact {r['fixed_bit_identical']}"
    )
