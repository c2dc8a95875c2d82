"""What L-BFGS's certification adds to the compile time of quad n = 64 (the compile
target of issue 18: at most 2 s, trace + lower + compile, default options), by ablation:
the certified solver against the same solver

- ``plumbing``: whose check returns "nothing left" at once (the lanes' gather, ``cond``
  and write-back of the rows to check, and the driver's trial step, stay);
- ``no-preconditioner``: whose conjugate gradients run unpreconditioned (the program
  then holds one L-BFGS two-loop recursion, the step's, not two);
- ``no-hessian``: whose Hessian-vector product is the identity (no forward-over-reverse
  copy of the objective);
- ``uncertified``: without the certification.

Compile: trace + lower + compile from scratch (caches cleared, a new objective each
time), 3 rounds interleaved after one warm-up, median (all three listed). Times and
steps: ``benchmarks/certify_cost.py``'s ``measure`` (compiled once each, interleaved,
median of 7).

    python -m benchmarks.certify_compile   # writes benchmarks/results/cpu-certify-compile-<date>.md
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics

import jax

import fixedopt
from benchmarks import certify_cost, compile_time
from benchmarks.certify_mechanism import NothingLeft
from fixedopt._solvers import certify, lbfgs


@dataclasses.dataclass(frozen=True)
class NoPreconditioner(fixedopt.LBFGS):
    """The default solver, traced with the certification's preconditioner patched out
    (a class of its own: a solver equal to another would share its compiled program)."""


@dataclasses.dataclass(frozen=True)
class NoHessian(fixedopt.LBFGS):
    """The default solver, traced with the Hessian-vector product patched out."""


def _patched(name: str, value):
    return certify_cost.patched(lbfgs, name, value)


SOLVERS = {
    "certified": fixedopt.LBFGS(),
    "plumbing": NothingLeft(),
    "no-preconditioner": NoPreconditioner(),
    "no-hessian": NoHessian(),
    "uncertified": certify_cost.Uncertified(),
}
CONTEXTS = {
    # The conjugate gradients without their preconditioner (the step's two-loop
    # recursion stays: the program then holds one, not two).
    "no-preconditioner": _patched(
        "conjugate_gradient_check",
        lambda product, precondition, g: certify.conjugate_gradient_check(product, lambda r: r, g),
    ),
    "no-hessian": _patched("hessian_times", lambda problem, x: lambda v: v),
}


def compile_seconds(solver, context) -> float:
    """Trace + lower + compile of ``minimize`` on quad n = 64, B = 1024 (default lanes)
    from scratch (``benchmarks.compile_time.compile_once``), traced inside ``context``."""
    case = compile_time.Case("quad-n64", "quad", 1024, None, compile_time.quad(64, solver))
    with context():
        return compile_time.compile_once(case)["total_wall_s"]


def main() -> None:
    jax.config.update("jax_enable_x64", True)
    compile_seconds(SOLVERS["certified"], contextlib.nullcontext)  # one-time costs
    samples: dict[str, list[float]] = {label: [] for label in SOLVERS}
    for _ in range(3):  # interleaved
        for label, solver in SOLVERS.items():
            context = CONTEXTS.get(label, contextlib.nullcontext)
            samples[label].append(compile_seconds(solver, context))
    row = certify_cost.measure("quad", 64, 1024, SOLVERS, CONTEXTS)  # times and steps
    for label, seconds in samples.items():
        row[f"{label}_compile_s"] = round(statistics.median(seconds), 2)
        row[f"{label}_compile_all_s"] = " ".join(f"{s:.2f}" for s in seconds)
    certify_cost.write("cpu-certify-compile", __doc__, [row])


if __name__ == "__main__":
    main()
