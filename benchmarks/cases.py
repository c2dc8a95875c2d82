"""One case: some methods on one problem and size, compiled, timed interleaved, checked.

A case may hold several problems of one size (the straggler case times the ``quad``
batch and the same batch with one ill-conditioned row together), so that every ratio
the report draws from it comes from one interleaved loop (A B C A B C ...). Quality is
checked independently of the method: objective values and gradients re-evaluated at
each method's final ``x`` with the problem's NumPy objective, in float64.
"""

from __future__ import annotations

import dataclasses

import numpy as np

import fixedopt
from benchmarks import loops, timing
from benchmarks.methods import (
    RowResults,
    Settings,
    Skipped,
    fixedopt_method,
    jaxopt_lbfgsb_vmap,
    optax_lbfgs_vmap_mask,
    tfp_lbfgs_batch,
)
from benchmarks.problems import PROBLEMS, Problem

METHODS = {
    "scipy-lbfgsb-loop": loops.scipy_lbfgsb_loop,
    "jaxopt-lbfgsb-vmap": jaxopt_lbfgsb_vmap,
    "optax-lbfgs-vmap-mask": optax_lbfgs_vmap_mask,
    "tfp-lbfgs-batch": tfp_lbfgs_batch,
    "fixedopt-mask": fixedopt_method(),
    "fixedopt-mask-compact": fixedopt_method(compact=True),
    "fixedopt-mask-nocompact": fixedopt_method(compact=False),
    "fixedopt-mask-chunk64": fixedopt_method(chunk_size=64),
    "fixedopt-split": fixedopt_method(strategy="split"),
    "fixedopt-hager-zhang": fixedopt_method(solver=fixedopt.LBFGS(linesearch="hager-zhang")),
    "scipy-least-squares-loop": loops.scipy_least_squares_loop,
    "lmfit-loop": loops.lmfit_loop,
    "fixedopt-lm": fixedopt_method(least_squares=True),
}
SEED = 0
AGREE_RTOL = 1e-6


@dataclasses.dataclass(frozen=True)
class Case:
    """Problems (one, or a few timed together) at one size; methods, the reference first.

    ``options``: keywords of the problem's generator (``condition`` of ``illquad``).
    """

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
    """How often to time: compiled methods aim at ``seconds`` of timed work each."""

    least: int = 3
    most: int = 7
    seconds: float = 3.0
    loops: int = 3  # the per-row NumPy loops
    slow_s: float = 15.0  # a call slower than this is timed once more only

    def compiled(self, run_s: float) -> int:
        if run_s > self.slow_s:
            return 1
        return max(self.least, min(self.most, int(self.seconds / max(run_s, 1e-6))))


def prepare(case: Case, problems: dict, settings: Settings) -> tuple[dict, dict]:
    """Runners by ``(problem, method)``, and the reasons of those skipped."""
    runners, skipped = {}, {}
    for name, problem in problems.items():
        for method in case.methods:
            try:
                runners[name, method] = METHODS[method](problem, settings)
            except Skipped as reason:
                skipped[name, method] = str(reason)
    return runners, skipped


def run_case(case: Case, settings: Settings, repeats: Repeats) -> list[dict]:
    """Compile, time (interleaved) and check every method on every problem of ``case``."""
    problems = {name: case.make(name) for name in case.problems}
    runners, skipped = prepare(case, problems, settings)
    first, counts = {}, {}
    for key, runner in runners.items():
        counts[key] = repeats.loops
        if runner.compiles:
            first[key] = timing.first_call(runner.call)
            counts[key] = repeats.compiled(first[key]["first_call_s"] - first[key]["compile_s"])
    times, outputs = timing.interleaved({k: r.call for k, r in runners.items()}, counts)
    records = []
    for name, problem in problems.items():
        base = {
            "kind": "case",
            "problem": problem.name,
            "group": "+".join(case.problems),
            "B": case.batch,
            "n": case.n,
            "dtype": case.dtype,
            "gtol": settings.gtol,
        }
        reference = None
        for method in case.methods:
            record = base | {"method": method}
            if (name, method) in skipped:
                records.append(record | {"skipped": skipped[name, method]})
                print(f"{name:>9} B={case.batch:<6} n={case.n:<4} {method:<24} skipped: "
                      f"{skipped[name, method]}", flush=True)  # fmt: skip
                continue
            runner = runners[name, method]
            result = runner.collect(outputs[name, method])
            record |= timing_fields(runner, times[name, method], first.get((name, method)))
            reference = reference or (result, record["time_median_s"])
            record |= quality(problem, result, reference[0], settings.gtol)
            records.append(record | {"time_vs_reference": record["time_median_s"] / reference[1]})
            print(progress(records[-1]), flush=True)
    return records


def timing_fields(runner, times: list[float], first: dict | None) -> dict:
    measured = timing.summary(times)
    return {
        "repeats": len(times),
        **{key: value * runner.scale for key, value in measured.items()},
        "extrapolated": runner.scale != 1.0,
        "measured_time_median_s": measured["time_median_s"],
        **(first or {"first_call_s": None, "compile_s": 0.0}),
        "memory_bytes": runner.memory(),
        "notes": list(runner.notes),
    }


def evaluate(problem: Problem, result: RowResults):
    """The rows solved, and there the objective and max |projected gradient| (free)."""
    rows = np.arange(problem.batch) if result.rows is None else result.rows
    x = np.asarray(result.x, np.float64)
    if problem.numpy_fun is None:
        return rows, np.asarray(result.value), np.full(rows.size, np.nan)
    values, grad = problem.numpy_fun(x, *(a[rows] for a in problem.args))
    if problem.bounds is not None:
        grad = x - np.clip(x - grad, *problem.bounds)
    free_grad = np.where(problem.fixed[rows], 0.0, np.abs(grad))
    return rows, values, np.max(free_grad, axis=-1, initial=0.0)


def fixed_bit_identical(problem: Problem, result: RowResults, rows) -> bool:
    """Whether every fixed entry of ``x`` has exactly the bits of ``x0`` in ``x``'s dtype."""
    fixed = problem.fixed[rows]
    got = np.ascontiguousarray(result.x[fixed])
    want = problem.x0[rows][fixed].astype(got.dtype)
    return bool(np.array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{got.itemsize}")))


def quality(problem: Problem, result: RowResults, reference: RowResults, gtol: float) -> dict:
    """Steps, convergence, agreement with the reference (on the rows both solved) and
    exactness of fixed entries."""
    rows, values, norms = evaluate(problem, result)
    ref_rows, ref_values, _ = evaluate(problem, reference)
    position = {row: i for i, row in enumerate(rows)}
    shared = np.array([i for i, row in enumerate(ref_rows) if row in position], int)
    mine = [position[row] for row in ref_rows[shared]]
    scale = np.maximum(np.abs(ref_values[shared]), 1.0)
    relative = np.abs(values[mine] - ref_values[shared]) / scale
    with np.errstate(invalid="ignore"):
        lower = values[mine] < ref_values[shared] - AGREE_RTOL * scale
    return {
        "rows_checked": int(rows.size),
        "steps_mean": float(np.mean(result.steps)),
        "steps_max": int(np.max(result.steps)),
        "converged_frac": float(np.mean(result.converged)),
        "gtol_met_frac": float(np.mean(norms <= gtol)),
        "max_rel_obj_diff": float(np.max(relative, initial=0.0)),
        "rows_compared": int(shared.size),
        "rows_agree_frac": float(np.mean(relative <= AGREE_RTOL)),
        "rows_lower_frac": float(np.mean(lower)),  # clearly lower f than the reference
        "rows_other_steps": int(np.sum(result.steps[mine] != reference.steps[shared])),
        "fixed_bit_identical": fixed_bit_identical(problem, result, rows),
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
