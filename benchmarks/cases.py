"""One case: methods on one size of a problem (or a few: the straggler case), timed in one
interleaved loop (A B C A B C ...), checked at each final ``x`` in NumPy float64."""

import dataclasses

import numpy as np

from benchmarks import timing
from benchmarks.methods import METHODS, RowResults, Settings, Skipped
from fixedopt.testing_problems import BATCHED, BatchedProblem

SEED = 0
AGREE_RTOL = 1e-6


@dataclasses.dataclass(frozen=True)
class Case:
    """Problems at one size; methods, the reference first."""

    problems: tuple[str, ...]
    batch: int
    n: int
    methods: tuple[str, ...]
    dtype: str = "float64"

    def make(self, name: str) -> BatchedProblem:
        return BATCHED[name](self.batch, self.n, SEED, self.dtype)


SLOW_S = 15.0  # a compiled call past it is timed once


def repeats(run_s: float, args) -> int:
    """Timed calls of a compiled method taking ``run_s``: ~3 s of work (quick: 0.3 s), at
    least ``--least-repeats`` (3; 1 below :data:`SLOW_S`) and at most ``--repeats``; one
    past :data:`SLOW_S`, or none where ``--least-repeats`` is 0: :func:`timed` keeps its
    first call's run (a first call's own costs, a fixedopt call's wait for a program
    compiled in a thread beside it, say, are under a second there)."""
    most = min(3, args.repeats) if args.quick else args.repeats
    least = min(getattr(args, "least_repeats", 3), most)
    if run_s > SLOW_S:
        return min(1, least)
    return max(least, 1, min(most, int((0.3 if args.quick else 3.0) / max(run_s, 1e-6))))


def timed(runners: dict, args) -> tuple[dict, dict, dict, set]:
    """Each compiled runner's first call (its compile seconds), then every runner's timed
    calls, interleaved: first calls, times, last outputs, and the runners timed by their
    first call alone (no more calls: ``--least-repeats 0`` past :data:`SLOW_S`)."""
    first, counts, kept = {}, {}, {}
    for key, runner in runners.items():
        counts[key] = args.loop_repeats
        if runner.compiles:
            keep = lambda key=key, call=runner.call: kept.__setitem__(key, call())
            first[key] = call = timing.first_call(keep)
            counts[key] = repeats(call["first_call_s"] - call["compile_s"], args)
            if counts[key]:
                del kept[key]
    times, outputs = timing.interleaved({k: r.call for k, r in runners.items()}, counts)
    for key, output in kept.items():
        times[key] = [first[key]["first_call_s"] - first[key]["compile_s"]]
        outputs[key] = output
    return first, times, outputs, set(kept)


def run_case(case: Case, settings: Settings, args) -> list[dict]:
    """Compile, time (interleaved) and check every method on every problem of ``case``."""
    problems = {name: case.make(name) for name in case.problems}
    keys = [(name, method) for name in problems for method in case.methods]
    runners, skipped = {}, {}
    for name, method in keys:
        try:
            runners[name, method] = METHODS[method](problems[name], settings)
        except Skipped as reason:
            skipped[name, method] = str(reason)
    first, times, outputs, once = timed(runners, args)
    records, references, firsts = [], {}, {}
    for name, method in keys:
        record = {"kind": "case", "problem": problems[name].name, "group": "+".join(case.problems),
                  "B": case.batch, "n": case.n, "dtype": case.dtype, "gtol": settings.gtol,
                  "method": method}  # fmt: skip
        if (name, method) in skipped:
            records.append(record | {"skipped": skipped[name, method]})
            continue
        runner, samples = runners[name, method], times[name, method]
        rows = runner.rows or case.batch
        record |= {"repeats": len(samples), "rows_solved": rows}
        record |= {k: v * case.batch / rows for k, v in timing.summary(samples).items()}
        record |= first.get((name, method), {"first_call_s": None, "compile_s": 0.0})
        record |= {"memory_bytes": runner.memory(), "notes": list(runner.notes)}
        if (name, method) in once:
            record["notes"].append("timed by its first call, compile subtracted")
        result = runner.collect(outputs[name, method])
        reference, seconds = references.setdefault(name, (result, record["time_median_s"]))
        record |= quality(problems[name], result, reference, settings.gtol)
        record["time_vs_reference"] = record["time_median_s"] / seconds
        if len(problems) > 1 and rows == case.batch:  # the straggler case
            firsts.setdefault(method, record["time_median_s"])
            record["time_vs_first_problem"] = record["time_median_s"] / firsts[method]
        records.append(record)
        print(
            f"{problems[name].name} B={case.batch} n={case.n} {case.dtype} {method}: "
            f"{record['time_median_s']:.3g} s, compile {record['compile_s']:.2f} s",
            flush=True,
        )
    return records


def evaluate(problem: BatchedProblem, result: RowResults):
    """The objective and the max |projected gradient| on free entries of each row."""
    x = np.asarray(result.x, np.float64)
    values, grad = problem.numpy_fun(x, *problem.args)
    if problem.bounds is not None:
        grad = x - np.clip(x - grad, *problem.bounds)
    return values, np.max(np.where(problem.fixed, 0.0, np.abs(grad)), axis=-1, initial=0.0)


def quality(
    problem: BatchedProblem, result: RowResults, reference: RowResults, gtol: float
) -> dict:
    """Steps, convergence, agreement with the reference, exactness of fixed entries."""
    solved = problem.rows(len(result.value))
    values, norms = evaluate(solved, result)
    ref_values, _ = evaluate(problem.rows(len(reference.value)), reference)
    both = min(len(values), len(ref_values))
    scale = np.maximum(np.abs(ref_values[:both]), 1.0)
    relative = np.abs(values[:both] - ref_values[:both]) / scale
    with np.errstate(invalid="ignore"):
        lower = values[:both] < ref_values[:both] - AGREE_RTOL * scale
    got = np.ascontiguousarray(result.x[solved.fixed])  # fixed entries, as unsigned ints
    want, bits = solved.x0[solved.fixed].astype(got.dtype), f"u{got.itemsize}"
    return {
        "steps_mean": float(np.mean(result.steps)),
        "steps_max": int(np.max(result.steps)),
        "converged_frac": float(np.mean(result.converged)),
        "gtol_met_frac": float(np.mean(norms <= gtol)),
        "max_rel_obj_diff": float(np.max(relative, initial=0.0)),
        "rows_agree_frac": float(np.mean(relative <= AGREE_RTOL)),
        "rows_lower_frac": float(np.mean(lower)),  # clearly lower f than the reference
        "rows_other_steps": int(np.sum(result.steps[:both] != reference.steps[:both])),
        "fixed_bit_identical": bool(np.array_equal(got.view(bits), want.view(bits))),
    }
