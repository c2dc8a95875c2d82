"""``python -m benchmarks.compile_time [--repeats N] [--cases NAME ...] [--label L]
[--xla-defaults-too]``: how long ``jit`` takes to trace, lower and compile fixedopt's
batched solves, and how big the programs are.

Each solve is compiled as a call of ``minimize`` or ``least_squares`` on its own is: with
``fixedopt.compiler_options(solver)`` (a ``jax.jit`` around the solve, which takes them;
on the CPU, XLA's elemental code generator for the least-squares fits, XLA's defaults for
``minimize``); with ``--xla-defaults-too``, also with XLA's defaults, as a solve inside
a ``jit`` of the user's own without them.

Each case is compiled ``--repeats`` times from scratch (``jax.clear_caches()`` and a new
objective function before each, so nothing is reused), the cases interleaved (A B A B
...). Every stage is timed apart, as wall time and as this process's CPU time (XLA:CPU
compiles its kernels on a thread pool: CPU time counts all of them, and drifts less than
wall time on a shared machine); the medians are reported. The program's size: the
fusions (each one kernel that XLA:CPU emits and compiles through LLVM, the bulk of the
compile time), the instructions of the optimized HLO module and the equations of the
jaxpr (sub-jaxprs included).

Cases (the tiny suite's problems, ``benchmarks.tiny_problems``, and ``quad`` of
``benchmarks.problems``): the 2D Gaussian of Gpufit's protocol (5x5 pixels, 5
parameters, float32, LevenbergMarquardt defaults) at B = 1e3 and 1e5, the two-exponential
decay (128 bins, float32) at B = 1e3, and ``minimize`` on ``quad`` n = 64 (float64,
L-BFGS defaults) at B = 1024 and 1e5; each through the default lanes and with
``lanes=1 << 30`` (the whole batch as one ``vmap``, no refill), for comparison.

Writes ``benchmarks/results/<backend>-compile-time[-label]-<date>.{json,md}``.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import pathlib
import re
import statistics
import time
from collections.abc import Callable

import jax
import jax.extend

jax.config.update("jax_enable_x64", True)  # quad runs in float64, as the solvers suite

import jax.numpy as jnp  # noqa: E402

import fixedopt  # noqa: E402
from benchmarks.timing import environment  # noqa: E402
from fixedopt.testing_problems import DECAY_BINS as BINS  # noqa: E402
from fixedopt.testing_problems import SPOT_GRID as GRID  # noqa: E402
from fixedopt.testing_problems import decay_model, gaussian_model, quad_jax  # noqa: E402

RESULTS = pathlib.Path(__file__).parent / "results"
WHOLE_BATCH = 1 << 30  # lanes >= B: the whole batch as one vmap
STAGES = ("trace", "lower", "compile")
FITS = ("gaussian", "decay")  # least_squares' problems; the others run minimize


@dataclasses.dataclass(frozen=True)
class Case:
    """One compiled program: ``build(lanes)`` returns a fresh ``(function, shapes)``."""

    name: str
    problem: str
    batch: int
    lanes: int | None
    build: Callable[[int | None, int], tuple[Callable, tuple]]
    xla_defaults: bool = False  # compiled with XLA's defaults, not fixedopt's options

    @property
    def label(self) -> str:
        options = ", XLA defaults" if self.xla_defaults else ""
        return f"{self.name} {'whole batch' if self.lanes else 'lanes'}{options}"


def _options(lanes: int | None) -> dict:
    return {} if lanes is None else {"lanes": lanes}


def _shapes(batch: int, *columns: tuple[int, jnp.dtype]) -> tuple:
    return tuple(jax.ShapeDtypeStruct((batch, width), dtype) for width, dtype in columns)


def fit(model: Callable, bins: int) -> Callable[[int | None, int], tuple[Callable, tuple]]:
    """A batched ``least_squares`` of ``model`` (5 float32 parameters, ``bins`` data)."""

    def build(lanes: int | None, batch: int) -> tuple[Callable, tuple]:
        residual = lambda p, data: model(p) - data  # new each time: traced anew

        def solve(x0, fixed, data):
            return fixedopt.least_squares(
                residual, x0, fixed, args=(data,), batched=True, **_options(lanes)
            )

        columns = ((5, jnp.float32), (5, jnp.bool_), (bins, jnp.float32))
        return solve, _shapes(batch, *columns)

    return build


def quad(n: int, solver=None) -> Callable[[int | None, int], tuple[Callable, tuple]]:
    """A batched ``minimize`` of ``quad`` (``n`` float64 unknowns, L-BFGS defaults, or
    ``solver``)."""
    options = {} if solver is None else {"solver": solver}

    def build(lanes: int | None, batch: int) -> tuple[Callable, tuple]:
        fun = lambda x, diag, off, b: quad_jax(x, diag, off, b)  # new each time

        def solve(x0, fixed, diag, off, b):
            return fixedopt.minimize(
                fun, x0, fixed, args=(diag, off, b), batched=True, **_options(lanes), **options
            )

        f64 = jnp.float64
        columns = ((n, f64), (n, jnp.bool_), (n, f64), (n - 1, f64), (n, f64))
        return solve, _shapes(batch, *columns)

    return build


def cases(xla_defaults_too: bool = False) -> list[Case]:
    problems = [
        ("gaussian-lm B=1e3", "gaussian", 10**3, fit(gaussian_model, GRID * GRID)),
        ("gaussian-lm B=1e5", "gaussian", 10**5, fit(gaussian_model, GRID * GRID)),
        ("decay-lm B=1e3", "decay", 10**3, fit(decay_model, BINS)),
        ("quad-n64-lbfgs B=1024", "quad", 1024, quad(64)),
        ("quad-n64-lbfgs B=1e5", "quad", 10**5, quad(64)),
    ]
    defaults = (False, True) if xla_defaults_too else (False,)
    return [Case(*p[:3], lanes, p[3], d) for p in problems for lanes in (None, WHOLE_BATCH)
            for d in defaults]  # fmt: skip


def jaxpr_equations(jaxpr: jax.extend.core.Jaxpr) -> int:
    """Equations of ``jaxpr`` and of every jaxpr inside it."""
    total = 0
    for equation in jaxpr.eqns:
        total += 1
        for inner in jax.extend.core.jaxprs_in_params(equation.params):
            total += jaxpr_equations(inner)
    return total


def solver_of(problem: str) -> fixedopt.Solver:
    """The solver a case's problem is solved with (its default)."""
    return fixedopt.LevenbergMarquardt() if problem in FITS else fixedopt.LBFGS()


def options_of(case: Case, solver: fixedopt.Solver) -> dict | None:
    """The compiler options a case compiles with: fixedopt's, or XLA's defaults."""
    return None if case.xla_defaults else fixedopt.compiler_options(solver)


def compile_once(case: Case) -> dict:
    """Trace, lower and compile ``case`` from scratch: seconds per stage, sizes."""
    jax.clear_caches()
    function, shapes = case.build(case.lanes, case.batch)
    clocks = [(time.perf_counter(), time.process_time())]
    options = options_of(case, solver_of(case.problem))
    traced = jax.jit(function, compiler_options=options).trace(*shapes)
    clocks.append((time.perf_counter(), time.process_time()))
    lowered = traced.lower()
    clocks.append((time.perf_counter(), time.process_time()))
    compiled = lowered.compile()
    clocks.append((time.perf_counter(), time.process_time()))
    record = {}
    for stage, (before, after) in zip(STAGES, itertools.pairwise(clocks)):
        record[f"{stage}_wall_s"] = after[0] - before[0]
        record[f"{stage}_cpu_s"] = after[1] - before[1]
    record["total_wall_s"] = clocks[-1][0] - clocks[0][0]
    record["total_cpu_s"] = clocks[-1][1] - clocks[0][1]
    hlo = compiled.as_text()
    record["fusions"] = len(re.findall(r" fusion\(", hlo))
    record["hlo_instructions"] = len(re.findall(r"^\s+\S.* = ", hlo, re.MULTILINE))
    record["jaxpr_equations"] = jaxpr_equations(traced.jaxpr.jaxpr)
    return record


def measure(selected: list[Case], repeats: int) -> list[dict]:
    """``repeats`` compiles of each case, interleaved; one record per case (medians)."""
    compile_once(dataclasses.replace(selected[0], batch=8))  # one-time costs: not counted
    samples: dict[str, list[dict]] = {case.label: [] for case in selected}
    for _ in range(repeats):
        for case in selected:
            samples[case.label].append(compile_once(case))
            print(f"{case.label}: {_line(samples[case.label][-1])}", flush=True)
    records = []
    for case in selected:
        runs = samples[case.label]
        medians = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        records.append({"kind": "compile_time", "case": case.name, "problem": case.problem,
                        "B": case.batch, "lanes": "whole batch" if case.lanes else "default",
                        "options": "XLA defaults" if case.xla_defaults else "fixedopt's",
                        "repeats": repeats, **medians,
                        "total_cpu_s_all": [run["total_cpu_s"] for run in runs]})  # fmt: skip
    return records


def _line(record: dict) -> str:
    stages = " + ".join(f"{record[f'{s}_wall_s']:.2f}" for s in STAGES)
    return (f"wall {stages} = {record['total_wall_s']:.2f} s, CPU "
            f"{record['total_cpu_s']:.2f} s, {record['fusions']} fusions")  # fmt: skip


COLUMNS = (("case", "case"), ("lanes", "lanes"), ("compiler options", "options"), *(
    (f"{s} wall / CPU s", (f"{s}_wall_s", f"{s}_cpu_s")) for s in (*STAGES, "total")),
    ("fusions", "fusions"), ("HLO instructions", "hlo_instructions"),
    ("jaxpr equations", "jaxpr_equations"))  # fmt: skip


def markdown(records: list[dict], title: str, env: dict) -> str:
    """A table of the medians, one row per case."""
    lines = [f"# {title}", "",
             f"Trace + lower + compile of each case from scratch (`jax.clear_caches()`), "
             f"median of {records[0]['repeats']} compiles, cases interleaved; wall and "
             f"process CPU seconds. Backend {env['backend']} ({env['device']}, "
             f"{env['host_cpus']} CPUs), jax {env['versions'].get('jax')}. "
             "`python -m benchmarks.compile_time`.", "",
             "| " + " | ".join(name for name, _ in COLUMNS) + " |",
             "|" + "---|" * len(COLUMNS)]  # fmt: skip
    for record in records:
        cells = []
        for _, key in COLUMNS:
            if isinstance(key, tuple):
                cells.append(f"{record[key[0]]:.2f} / {record[key[1]]:.2f}")
            else:
                cells.append(str(record[key]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> pathlib.Path:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compile_time",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("--repeats", type=int, default=3, help="compiles per case (>= 3)")
    parser.add_argument("--cases", nargs="*", help="case names to run (default: all)")
    parser.add_argument("--label", default="", help="added to the results' file name")
    parser.add_argument("--xla-defaults-too", action="store_true",
                        help="each case also compiled with XLA's default options")  # fmt: skip
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS, help="results folder")
    args = parser.parse_args(argv)
    every = cases(args.xla_defaults_too)
    selected = [c for c in every if not args.cases or c.name in args.cases]
    env = environment() | {"suite": "compile_time"}
    records = [env | r for r in measure(selected, args.repeats)]
    return write(records, env, markdown, args.out, "compile-time", args.label)


def write(
    records: list[dict], env: dict, markdown: Callable, out: pathlib.Path, name: str, label: str
) -> pathlib.Path:
    """``records`` as ``<out>/<backend>-<name>[-<label>]-<date>.{json,md}``
    (``markdown(records, title, env)`` writes the table); returns the files' stem."""
    stem = out / f"{env['backend']}-{name}{'-' + label if label else ''}-{env['date']}"
    out.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(records, indent=1, default=str) + "\n")
    stem.with_suffix(".md").write_text(markdown(records, stem.name, env))
    print(f"wrote {stem}.json and .md")
    return stem


if __name__ == "__main__":
    main()
