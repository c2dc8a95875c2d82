"""The methods under comparison, by name: each turns a :class:`Problem` into a Runner.

``METHODS[name](problem, settings) -> Runner`` moves the data to the device and builds
the solver; ``Runner.call()`` solves the batch once, blocked (the timed part; for a
compiled method the first call compiles), and ``Runner.collect`` turns its output into
per-row NumPy results. A method that cannot run here raises :class:`Skipped`. The
registry of names is :data:`benchmarks.cases.METHODS`; the per-row NumPy loops (scipy,
lmfit) live in :mod:`benchmarks.loops`.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

import fixedopt
from benchmarks.problems import Problem

GTOL = {"float64": 1e-6, "float32": 1e-3}  # float32 gradients are not accurate to 1e-6
HISTORY = 10  # curvature pairs, as optax's and fixedopt's L-BFGS
jitted = functools.cache(jax.jit)  # one jitted function per public call


@dataclasses.dataclass(frozen=True)
class Settings:
    """The stopping rule every method uses: max |projected gradient| <= ``gtol``.

    The per-row loops solve at most ``loop_rows`` rows and jaxopt at most
    ``jaxopt_work // n`` rows (the first ones; rows are i.i.d.); their times are
    extrapolated to the batch (which flatters jaxopt: a ``vmap``-ed loop runs as long
    as its slowest row, and a larger batch has slower ones).
    """

    gtol: float = 1e-6
    max_steps: int = 5000
    loop_rows: int | None = None
    jaxopt_work: int | None = None

    @property
    def fixedopt_tolerances(self) -> dict:
        """fixedopt's keywords for this rule: the absolute test alone."""
        return {"abs_gtol": self.gtol, "gtol": 0.0, "ftol": 0.0, "xtol": 0.0}


class RowResults(NamedTuple):
    """Per-row outcome of one batched solve, as NumPy arrays (``rows``: those solved)."""

    x: np.ndarray
    value: np.ndarray
    steps: np.ndarray
    converged: np.ndarray  # as the method itself reports it
    rows: np.ndarray | None = None


@dataclasses.dataclass(frozen=True)
class Runner:
    """A prepared method. ``scale``: from a call's time to the whole batch's;
    ``memory()``: XLA's estimate of the compiled program's bytes, or None."""

    call: Callable[[], Any]
    collect: Callable[[Any], RowResults]
    compiles: bool
    scale: float = 1.0
    memory: Callable[[], int | None] = lambda: None
    notes: tuple[str, ...] = ()


class Skipped(Exception):  # noqa: N818 (not an error: a method that cannot run here)
    """A method cannot run here; the message says why (recorded in JSON and markdown)."""


def device_inputs(problem: Problem) -> tuple:
    """``(x0, fixed, *args)`` as JAX arrays in the problem's dtype."""
    dtype = jnp.dtype(problem.dtype)
    args = tuple(jnp.asarray(a, dtype) for a in problem.args)
    return (jnp.asarray(problem.x0, dtype), jnp.asarray(problem.fixed), *args)


def as_rows(x, value, steps, converged) -> RowResults:
    """Device arrays to :class:`RowResults` (a scalar ``steps`` given to every row)."""
    value = np.asarray(value, np.float64)
    steps = np.broadcast_to(np.asarray(steps), value.shape)
    return RowResults(np.asarray(x), value, steps, np.asarray(converged))


def compiled_runner(solve, inputs: tuple, collect=lambda out: as_rows(*out), notes=()):
    """A runner for a ``jax.jit``-ed ``solve(*inputs)``, its memory from XLA's analysis
    (answered from JAX's cache once the first call has compiled)."""

    def memory():
        stats = solve.lower(*inputs).compile().memory_analysis()
        if stats is None:
            return None
        return int(stats.argument_size_in_bytes + stats.output_size_in_bytes
                   + stats.temp_size_in_bytes - stats.alias_size_in_bytes)  # fmt: skip

    call = lambda: jax.block_until_ready(solve(*inputs))
    return Runner(call, collect, compiles=True, memory=memory, notes=tuple(notes))


def masked(fun):
    """``fun`` with fixed entries pinned to ``x0`` by ``where + stop_gradient``."""
    return lambda x, x0, fixed, *args: fun(jnp.where(fixed, jax.lax.stop_gradient(x0), x), *args)


def _import(name: str, install: str):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # jaxopt warns that it is unmaintained
            if name == "jaxopt":
                import jaxopt

                return jaxopt
            from tensorflow_probability.substrates import jax as tfp

            return tfp
    except Exception as error:  # any failure to import is a reason to skip
        raise Skipped(f"{name} does not import ({type(error).__name__}); {install}") from None


def jaxopt_lbfgsb_vmap(problem: Problem, settings: Settings) -> Runner:
    """``jaxopt.LBFGSB`` under ``jit(vmap)`` with ``lb == ub`` on fixed entries; stops on
    the max-norm of the projected gradient, or when a row's line search fails."""
    jaxopt = _import("jaxopt", "pip install jaxopt")
    rows = problem.batch if settings.jaxopt_work is None else settings.jaxopt_work // problem.size
    cut = problem.rows(max(1, min(rows, problem.batch)))
    solver = jaxopt.LBFGSB(fun=problem.jax_fun, tol=settings.gtol, maxiter=settings.max_steps,
                           history_size=HISTORY, stop_if_linesearch_fails=True)  # fmt: skip

    def solve_row(x0, fixed, *args):
        lower, upper = (jnp.full_like(x0, -jnp.inf), jnp.full_like(x0, jnp.inf))
        if problem.bounds is not None:
            lower, upper = (jnp.asarray(b, x0.dtype) for b in problem.bounds)
        bounds = (jnp.where(fixed, x0, lower), jnp.where(fixed, x0, upper))
        state = (result := solver.run(x0, bounds, *args)).state
        return result.params, state.value, state.iter_num, state.error <= settings.gtol

    runner = compiled_runner(jax.jit(jax.vmap(solve_row)), device_inputs(cut))
    if cut.batch == problem.batch:
        return runner
    collect = lambda out: runner.collect(out)._replace(rows=np.arange(cut.batch))
    note = f"solved {cut.batch} rows of {problem.batch} (extrapolated)"
    scale = problem.batch / cut.batch
    return dataclasses.replace(runner, collect=collect, scale=scale, notes=(note,))


def tfp_lbfgs_batch(problem: Problem, settings: Settings) -> Runner:
    """TFP's ``lbfgs_minimize`` on the whole batch (JAX substrate), objective masked: each
    row is frozen once converged; one iteration count for the batch. No bounds."""
    if problem.bounds is not None:
        raise Skipped("TFP's lbfgs_minimize has no bounds")
    tfp = _import("tfp", "pip install tfp-nightly (stable 0.25 does not import with jax 0.10)")
    value_and_grad = jax.vmap(jax.value_and_grad(masked(problem.jax_fun)))

    def solve(x0, fixed, *args):
        result = tfp.optimizer.lbfgs_minimize(
            lambda x: value_and_grad(x, x0, fixed, *args), initial_position=x0,
            tolerance=settings.gtol, max_iterations=settings.max_steps,
            num_correction_pairs=HISTORY,
        )  # fmt: skip
        return result.position, result.objective_value, result.num_iterations, result.converged

    note = "TFP: one iteration count for the whole batch (steps = the batch's)"
    return compiled_runner(jax.jit(solve), device_inputs(problem), notes=(note,))


def optax_lbfgs_vmap_mask(problem: Problem, settings: Settings) -> Runner:
    """``optax.lbfgs`` in a ``while_loop`` under ``jit(vmap)``: objective masked with
    ``where + stop_gradient``, projection after each step. No bounds."""
    if problem.bounds is not None:
        raise Skipped("the optax recipe has no bounds")
    return compiled_runner(optax_program(problem.jax_fun, settings), device_inputs(problem))


@functools.cache
def optax_program(objective, settings: Settings):
    """The optax recipe for ``objective``, jitted once per objective and settings."""
    optimizer = optax.lbfgs()

    def solve_row(x0, fixed, *args):
        fun = lambda x: masked(objective)(x, x0, fixed, *args)
        value_and_grad = optax.value_and_grad_from_state(fun)
        norm = lambda state: jnp.max(jnp.where(fixed, 0.0, jnp.abs(optax.tree.get(state, "grad"))))

        def cond(carry):
            _, state, steps = carry
            return (steps == 0) | ((steps < settings.max_steps) & (norm(state) > settings.gtol))

        def body(carry):
            x, state, steps = carry
            value, grad = value_and_grad(x, state=state)
            updates, state = optimizer.update(grad, state, x, value=value, grad=grad, value_fn=fun)
            return jnp.where(fixed, x0, optax.apply_updates(x, updates)), state, steps + 1

        x, state, steps = jax.lax.while_loop(cond, body, (x0, optimizer.init(x0), 0))
        return x, optax.tree.get(state, "value"), steps, norm(state) <= settings.gtol

    return jax.jit(jax.vmap(solve_row))


@functools.cache
def public_call(fun, settings: Settings, least_squares: bool, options: tuple):
    """``call(x0, fixed, bounds, *args) -> Solution``, the public ``minimize`` (or
    ``least_squares``): one function per objective, settings and options, so that JAX's
    caches serve every problem of one shape."""
    solve = fixedopt.least_squares if least_squares else fixedopt.minimize

    def call(x0, fixed, bounds, *args):
        return solve(
            fun,
            x0,
            fixed,
            args=args,
            bounds=bounds,
            batched=True,
            max_steps=settings.max_steps,
            **settings.fixedopt_tolerances,
            **dict(options),
        )

    return call


def fixedopt_call(problem: Problem, settings: Settings, least_squares=False, **options):
    """The public call on ``problem``, and its inputs ``(x0, fixed, bounds, *args)``."""
    x0, fixed, *args = device_inputs(problem)
    bounds = problem.bounds and tuple(jnp.asarray(b, x0.dtype) for b in problem.bounds)
    fun = problem.jax_residual if least_squares else problem.jax_fun
    call = public_call(fun, settings, least_squares, tuple(options.items()))
    return call, (x0, fixed, bounds, *args)


def solution_rows(solution) -> RowResults:
    return as_rows(solution.x, solution.value, solution.steps, solution.converged)


def fixedopt_method(**options) -> Callable[[Problem, Settings], Runner]:
    """A fixedopt method: the public call with ``options``, traced in the benchmark's
    ``jit`` (the program the public call compiles), or called as is for ``split``
    (which needs the concrete mask: packing its indices is part of the time)."""

    def method(problem: Problem, settings: Settings) -> Runner:
        least_squares = options.get("least_squares", False)
        if least_squares and problem.jax_residual is None:
            raise Skipped("not a least-squares problem")
        call, inputs = fixedopt_call(problem, settings, **options)
        if options.get("strategy") != "split":
            return compiled_runner(jitted(call), inputs, solution_rows)
        note = "split: the public call (packing the concrete mask's indices is timed)"
        run = lambda: jax.block_until_ready(call(*inputs))
        return Runner(run, solution_rows, compiles=True, notes=(note,))

    method.__doc__ = f"fixedopt, options {options or 'the defaults'}"
    return method
