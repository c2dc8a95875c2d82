"""What every method shares: the stopping rule, the prepared runner, per-row results.

A method is a function ``method(problem, settings) -> Runner``. Preparing moves the
data to the device and builds the solver; ``Runner.call()`` then solves the whole batch
once (the timed part: it blocks until the result is ready) and ``Runner.collect`` turns
its output into per-row NumPy results (untimed). For compiled methods the runner's
first call compiles; :mod:`benchmarks.cases` times it separately. A method that cannot
run here (a package that does not install or import) raises :class:`Skipped`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.problems import Problem

GTOL = {"float64": 1e-6, "float32": 1e-3}  # float32 gradients are not accurate to 1e-6


@dataclasses.dataclass(frozen=True)
class Settings:
    """The stopping rule every method uses: max |projected gradient| <= ``gtol``.

    ``loop_rows``: the per-row NumPy loops (scipy, lmfit) solve at most this many rows
    (the first ones; rows are i.i.d.) and their time is extrapolated to the batch.
    ``jaxopt_work``: jaxopt, 2–10x slower than the rest on large batches, solves at most
    ``jaxopt_work // n`` rows, extrapolated likewise (which flatters it: a ``vmap``-ed
    loop runs as long as its slowest row, and a larger batch has slower ones).
    """

    gtol: float = 1e-6
    max_steps: int = 5000
    loop_rows: int | None = None
    jaxopt_work: int | None = None

    @classmethod
    def for_dtype(cls, dtype: str, **overrides) -> Settings:
        return cls(**({"gtol": GTOL[dtype]} | overrides))

    @property
    def fixedopt_tolerances(self) -> dict:
        """fixedopt's keywords for this rule: the absolute test alone."""
        return absolute_gradient_test(self.gtol)


def absolute_gradient_test(gtol: float) -> dict:
    """``minimize``/``least_squares`` keywords that stop on max |projected gradient| <=
    ``gtol`` alone (the relative tests off), the rule every compared method uses."""
    return {"abs_gtol": gtol, "gtol": 0.0, "ftol": 0.0, "xtol": 0.0}


class RowResults(NamedTuple):
    """Per-row outcome of one batched solve, as NumPy arrays.

    ``rows``: the indices of the rows solved (``None``: all of them), for methods that
    solve a subsample.
    """

    x: np.ndarray  # (rows, n)
    value: np.ndarray  # (rows,)
    steps: np.ndarray  # (rows,) iterations per row
    converged: np.ndarray  # (rows,) as the method itself reports it
    rows: np.ndarray | None = None


@dataclasses.dataclass(frozen=True)
class Runner:
    """A prepared method: ``call()`` solves the batch once (timed), blocked.

    ``scale``: the factor from a call's time to the whole batch's (``B / rows`` for a
    subsampled loop, else 1). ``memory()``: XLA's estimate of the compiled program's
    memory (arguments + outputs + temporaries, in bytes), or ``None``. ``notes``: facts
    about the method worth a line in the report.
    """

    call: Callable[[], Any]
    collect: Callable[[Any], RowResults]
    compiles: bool  # whether the first call compiles (and is timed apart)
    scale: float = 1.0
    memory: Callable[[], int | None] = lambda: None
    notes: tuple[str, ...] = ()


class Skipped(Exception):  # noqa: N818 (not an error: a method that cannot run here)
    """A method cannot run here; the message says why (recorded in JSON and markdown)."""


def first_rows(problem: Problem, rows: int | None) -> tuple[Problem, float]:
    """The problem cut to its first ``rows`` rows (if fewer than ``B``), and ``B / rows``."""
    if rows is None or rows >= problem.batch:
        return problem, 1.0
    cut = dataclasses.replace(
        problem,
        x0=problem.x0[:rows],
        fixed=problem.fixed[:rows],
        args=tuple(a[:rows] for a in problem.args),
    )
    return cut, problem.batch / rows


def subsampled(runner: Runner, scale: float, rows: int) -> Runner:
    """``runner`` (on the first ``rows`` rows) marked as extrapolated by ``scale``."""
    if scale == 1.0:
        return runner
    return dataclasses.replace(
        runner,
        collect=lambda out: runner.collect(out)._replace(rows=np.arange(rows)),
        scale=scale,
        notes=(*runner.notes, f"solved {rows} rows of {round(rows * scale)} (extrapolated)"),
    )


def device_inputs(problem: Problem):
    """``x0``, ``fixed`` and ``args`` as JAX arrays, in the problem's dtype."""
    dtype = jnp.dtype(problem.dtype)
    x0 = jnp.asarray(problem.x0, dtype)
    args = tuple(jnp.asarray(a, dtype) for a in problem.args)
    return x0, jnp.asarray(problem.fixed), args


def device_bounds(problem: Problem):
    """``(lower, upper)`` broadcast to ``(B, n)`` with ``±inf`` where unbounded."""
    shape, dtype = problem.x0.shape, jnp.dtype(problem.dtype)
    if problem.bounds is None:
        return jnp.full(shape, -jnp.inf, dtype), jnp.full(shape, jnp.inf, dtype)
    return tuple(jnp.broadcast_to(jnp.asarray(b, dtype), shape) for b in problem.bounds)


def compiled_runner(solve, inputs: tuple, collect, notes=()) -> Runner:
    """A runner for a ``jax.jit``-ed ``solve(*inputs)``; its memory from XLA's analysis.

    The analysis lowers and compiles ``solve`` again, which JAX answers from its cache
    once the first call has compiled it: it costs no second compilation.
    """

    def call():
        return jax.block_until_ready(solve(*inputs))

    def memory():
        stats = solve.lower(*inputs).compile().memory_analysis()
        if stats is None:
            return None
        used = (
            stats.argument_size_in_bytes
            + stats.output_size_in_bytes
            + stats.temp_size_in_bytes
            - stats.alias_size_in_bytes
        )
        return int(used)

    return Runner(call, collect, compiles=True, memory=memory, notes=tuple(notes))


def as_row_results(x, value, steps, converged) -> RowResults:
    """Device arrays to :class:`RowResults` (``x`` keeps its dtype: fixed entries are
    checked bit for bit; a scalar ``steps`` is given to every row)."""
    return RowResults(
        x=np.asarray(x),
        value=np.asarray(value, np.float64),
        steps=np.broadcast_to(np.asarray(steps), np.shape(value)),
        converged=np.asarray(converged),
    )
