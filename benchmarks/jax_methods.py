"""The JAX methods: today's optax recipe, and fixedopt's strategies and solvers.

The optax recipe and fixedopt's mask strategy run as one ``jax.jit`` program each (for
fixedopt: the public call traced inside the benchmark's ``jit``, the same program the
public call compiles), so that XLA's memory analysis is available for both.
``strategy="split"`` needs a concrete mask and runs as the public call itself.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

import fixedopt
from benchmarks.base import (
    Runner,
    Settings,
    Skipped,
    as_row_results,
    compiled_runner,
    device_inputs,
)
from benchmarks.problems import Problem
from benchmarks.timing import compile_monitor

# --- optax.lbfgs in a while_loop under vmap: today's best JAX recipe --------------------


def _optax_row_solver(fun, settings: Settings):
    """The standard optax L-BFGS loop for one row, masked and projected."""
    optimizer = optax.lbfgs()

    def solve_row(x0, fixed, *args):
        pinned = jax.lax.stop_gradient(x0)

        def masked(x):
            return fun(jnp.where(fixed, pinned, x), *args)

        value_and_grad = optax.value_and_grad_from_state(masked)

        def grad_norm(state):
            grad = optax.tree.get(state, "grad")
            return jnp.max(jnp.where(fixed, 0.0, jnp.abs(grad)))

        def cond(carry):
            _, state, steps = carry
            running = (steps < settings.max_steps) & (grad_norm(state) > settings.gtol)
            return (steps == 0) | running

        def body(carry):
            x, state, steps = carry
            value, grad = value_and_grad(x, state=state)
            updates, state = optimizer.update(
                grad, state, x, value=value, grad=grad, value_fn=masked
            )
            x = jnp.where(fixed, x0, optax.apply_updates(x, updates))
            return x, state, steps + 1

        x, state, steps = jax.lax.while_loop(cond, body, (x0, optimizer.init(x0), 0))
        norm = grad_norm(state)
        return x, optax.tree.get(state, "value"), steps, norm <= settings.gtol

    return solve_row


def optax_lbfgs_vmap_mask(problem: Problem, settings: Settings) -> Runner:
    """``optax.lbfgs`` under ``jit(vmap)``: ``where + stop_gradient`` mask, projection."""
    if problem.bounds is not None:
        raise Skipped("the optax recipe has no bounds")
    solve = jax.jit(jax.vmap(_optax_row_solver(problem.jax_fun, settings)))
    x0, fixed, args = device_inputs(problem)
    return compiled_runner(solve, (x0, fixed, *args), lambda out: as_row_results(*out))


# --- fixedopt -----------------------------------------------------------------------------


def _fixedopt_call(problem: Problem, settings: Settings, residuals=False, **options):
    """``(x0, fixed, bounds, *args) -> Solution`` of ``minimize`` (or ``least_squares``)."""
    solve, fun = fixedopt.minimize, problem.jax_fun
    if residuals:
        solve, fun = fixedopt.least_squares, problem.least_squares.jax_residual

    def call(x0, fixed, bounds, *args):
        return solve(
            fun,
            x0,
            fixed,
            args=args,
            bounds=bounds,
            batched=True,
            **settings.fixedopt_tolerances,
            max_steps=settings.max_steps,
            **options,
        )

    return call


def _inputs(problem: Problem) -> tuple:
    """``(x0, fixed, bounds, *args)`` on the device; ``bounds`` is None or ``(n,)`` arrays."""
    x0, fixed, args = device_inputs(problem)
    bounds = None
    if problem.bounds is not None:
        bounds = tuple(jnp.asarray(b, x0.dtype) for b in problem.bounds)
    return (x0, fixed, bounds, *args)


def _solution_rows(solution):
    return as_row_results(solution.x, solution.value, solution.steps, solution.converged)


def _fixedopt_jit(problem: Problem, settings: Settings, **options) -> Runner:
    solve = jax.jit(_fixedopt_call(problem, settings, **options))
    return compiled_runner(solve, _inputs(problem), _solution_rows)


def fixedopt_mask(problem: Problem, settings: Settings) -> Runner:
    """``fixedopt.minimize(..., batched=True)``: every default (LBFGS, mask strategy)."""
    return _fixedopt_jit(problem, settings)


def fixedopt_mask_compact(problem: Problem, settings: Settings) -> Runner:
    """As ``fixedopt-mask`` with ``compact=True``: running rows gathered into smaller
    batches as the others finish."""
    return _fixedopt_jit(problem, settings, compact=True)


def fixedopt_mask_nocompact(problem: Problem, settings: Settings) -> Runner:
    """As ``fixedopt-mask`` with ``compact=False``: plain ``vmap`` of the row loop."""
    return _fixedopt_jit(problem, settings, compact=False)


def fixedopt_mask_chunk64(problem: Problem, settings: Settings) -> Runner:
    """As ``fixedopt-mask`` with ``chunk_size=64``: 64 rows at a time, so that on a CPU
    each chunk's solver state stays in cache."""
    return _fixedopt_jit(problem, settings, chunk_size=64)


def fixedopt_lm(problem: Problem, settings: Settings) -> Runner:
    """``fixedopt.least_squares(..., batched=True)``: Levenberg–Marquardt, mask strategy."""
    if problem.least_squares is None:
        raise Skipped("not a least-squares problem")
    return _fixedopt_jit(problem, settings, residuals=True)


def fixedopt_split(problem: Problem, settings: Settings) -> Runner:
    """``strategy="split"`` (padded index splitting), as the public call itself."""
    call, inputs = _fixedopt_call(problem, settings, strategy="split"), _inputs(problem)
    return Runner(
        lambda: jax.block_until_ready(call(*inputs)),
        _solution_rows,
        compiles=True,
        notes=(
            "split: the public call (the packed indices are computed from the concrete "
            "mask on every call, included in the time)",
        ),
    )


# --- compilations -------------------------------------------------------------------------


def cache_size() -> int | None:
    """Entries in fixedopt's compiled-solve cache (None if no known private handle).

    The compiled core is ``fixedopt._engine.run`` (earlier ``fixedopt._minimize._run``).
    """
    for module, name in (("_engine", "run"), ("_minimize", "_run")):
        run = getattr(getattr(fixedopt, module, None), name, None)
        if hasattr(run, "_cache_size"):
            return run._cache_size()
    return None


def compiles_during(call) -> dict:
    """New entries in fixedopt's jit cache and XLA compilations during ``call()``."""
    before = cache_size()
    with compile_monitor() as compiles:
        call()
    after = cache_size()
    growth = None if before is None or after is None else after - before
    return {"cache_growth": growth, "backend_compiles": compiles.count}


def fixedopt_compiles_on_new_mask(
    problem: Problem, settings: Settings, seed: int, residuals: bool = False
) -> dict:
    """The public call with a new mask after one with the old: compilations (must be 0).

    ``cache_growth``: new entries in fixedopt's jit cache (:func:`cache_size`);
    ``backend_compiles``: XLA compilations of any kind during the call.
    """

    def public_call(problem):
        call, inputs = _fixedopt_call(problem, settings, residuals), _inputs(problem)
        return lambda: jax.block_until_ready(call(*inputs))

    public_call(problem)()  # compiles here unless an earlier call did
    return compiles_during(public_call(problem.with_mask(seed)))
