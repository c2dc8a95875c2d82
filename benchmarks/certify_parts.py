"""Where L-BFGS's certification spends its time at small n (issue 18: quad n = 8,
B = 1024 against TFP's batched L-BFGS, which certifies nothing): whole solves of the
default ``LBFGS()`` against ablations, then the check's parts alone per row.

Solves (``certify_cost.measure``: compiled once each, interleaved, median of
``REPEATS``): ``certified`` (the default), ``uncertified`` (no check),
``nothing_left`` (the mechanism alone: rows wait PENDING, the lanes gather, check and
write back; the check answers at once), and the default with the check's slots at a
sixteenth and a quarter of the lanes (an eighth by default, ``certify_slots``).
Parts (one ``vmap`` over ``B`` rows, jitted alone): the whole Hessian (``n``
Hessian-vector products), the Hessian and its sweep, and ``newton_check``.

    python -m benchmarks.certify_parts   # writes benchmarks/results/cpu-certify-parts-<date>.md
"""

from __future__ import annotations

import dataclasses
import datetime
import pathlib
import statistics

import jax
import jax.numpy as jnp

import fixedopt
from benchmarks import problems, timing
from benchmarks.certify_cost import Uncertified, measure, patched
from benchmarks.certify_mechanism import NothingLeft
from fixedopt._driver import lanes
from fixedopt._solvers import certify

N, BATCH, REPEATS = 8, 1024, 41


@dataclasses.dataclass(frozen=True)
class SixteenthSlots(fixedopt.LBFGS):
    """The default solver, traced with a sixteenth of the lanes as check slots (a
    class of its own: a solver equal to another would share its compiled program)."""


@dataclasses.dataclass(frozen=True)
class QuarterSlots(fixedopt.LBFGS):
    """The default solver, traced with a quarter of the lanes as check slots."""


def _slots(share: int):
    return patched(lanes, "certify_slots", lambda width: max(1, min(width, -(-width // share))))


SOLVERS = {
    "certified": fixedopt.LBFGS(),
    "uncertified": Uncertified(),
    "nothing_left": NothingLeft(),
    "slots_sixteenth": SixteenthSlots(),
    "slots_quarter": QuarterSlots(),
}
CONTEXTS = {"slots_sixteenth": _slots(16), "slots_quarter": _slots(4)}


def parts(batch: int = BATCH, n: int = N) -> dict:
    """Microseconds per row of the check's parts, on ``batch`` rows of quad."""
    problem = problems.quad(batch, n)
    args = tuple(map(jnp.asarray, problem.args))
    x, free = jnp.asarray(problem.x0), jnp.ones((batch, n), bool)
    gradient = jax.grad(problem.jax_fun)

    def products(x, *args):
        return lambda v: jax.jvp(lambda z: gradient(z, *args), (x,), (v,))[1]

    def hessian(x, free, *args):
        return jax.vmap(products(x, *args))(jnp.eye(n, dtype=x.dtype))

    def swept(x, free, *args):
        return certify._sweep(hessian(x, free, *args), -1e-8, 1e-16)

    def newton(x, free, *args):
        g, value = gradient(x, *args), problem.jax_fun(x, *args)
        return certify.newton_check(products(x, *args), g, value, free)

    calls = {}
    for name, part in (("hessian", hessian), ("hessian_and_sweep", swept),
                       ("newton_check", newton)):  # fmt: skip
        jitted = jax.jit(jax.vmap(part))
        calls[name] = lambda jitted=jitted: jax.block_until_ready(jitted(x, free, *args))
        calls[name]()  # compiled before timing
    times, _ = timing.interleaved(calls, REPEATS)
    return {f"{k}_us_per_row": round(1e6 * statistics.median(t) / batch, 3)
            for k, t in times.items()}  # fmt: skip


def main() -> None:
    jax.config.update("jax_enable_x64", True)
    solves = measure("quad", N, BATCH, SOLVERS, CONTEXTS, repeats=REPEATS)
    per_row = parts()
    name = f"cpu-certify-parts-{datetime.date.today()}"
    lines = [f"# {name}", "", __doc__.strip().split("\n\n")[0], "", "| solve | ms | steps "
             "| converged | compile s |", "|---|---|---|---|---|"]  # fmt: skip
    lines += [f"| {label} | {solves[f'{label}_ms']} | {solves[f'{label}_steps']} | "
              f"{solves[f'{label}_converged']} | {solves[f'{label}_compile_s']} |"
              for label in SOLVERS]  # fmt: skip
    lines += ["", f"| part, {BATCH} rows | us per row |", "|---|---|"]
    lines += [f"| {k.removesuffix('_us_per_row')} | {v} |" for k, v in per_row.items()]
    text = "\n".join(lines) + "\n"
    (pathlib.Path(__file__).parent / "results" / f"{name}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
