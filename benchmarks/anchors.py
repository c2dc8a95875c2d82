"""Batched anchors from other libraries: jaxopt's L-BFGS-B and TFP's batched L-BFGS.

Both are optional: a package that does not install or import makes its method a
:class:`~benchmarks.base.Skipped` record with the error message.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp

from benchmarks.base import (
    Runner,
    Settings,
    Skipped,
    as_row_results,
    compiled_runner,
    device_bounds,
    device_inputs,
    first_rows,
    subsampled,
)
from benchmarks.problems import Problem

HISTORY = 10  # curvature pairs, as optax's and fixedopt's L-BFGS


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
        raise Skipped(
            f"{name} does not import ({type(error).__name__}: {error}); install: {install}"
        ) from None


def _cut(problem: Problem, settings: Settings):
    rows = None if settings.jaxopt_work is None else max(1, settings.jaxopt_work // problem.size)
    return first_rows(problem, rows)


def jaxopt_lbfgsb_vmap(problem: Problem, settings: Settings) -> Runner:
    """``jaxopt.LBFGSB`` under ``jit(vmap)`` with ``lb == ub`` on fixed entries.

    jaxopt stops on the max-norm of the projected gradient, the same rule as ours
    (``state.error <= tol``), or when a row's line search fails.
    """
    jaxopt = _import("jaxopt", "pip install jaxopt")
    problem, scale = _cut(problem, settings)
    solver = jaxopt.LBFGSB(
        fun=problem.jax_fun,
        tol=settings.gtol,
        maxiter=settings.max_steps,
        history_size=HISTORY,
        stop_if_linesearch_fails=True,  # else a failed row iterates to maxiter, and
    )  # under vmap so does every row (seen in float32: 5000 steps, 90 s for 512 rows)

    def solve_row(x0, lower, upper, *args):
        result = solver.run(x0, (lower, upper), *args)
        state = result.state
        return result.params, state.value, state.iter_num, state.error <= settings.gtol

    x0, fixed, args = device_inputs(problem)
    lower, upper = device_bounds(problem)
    lower, upper = jnp.where(fixed, x0, lower), jnp.where(fixed, x0, upper)
    solve = jax.jit(jax.vmap(solve_row))
    runner = compiled_runner(solve, (x0, lower, upper, *args), lambda out: as_row_results(*out))
    return subsampled(runner, scale, problem.batch)


def tfp_lbfgs_batch(problem: Problem, settings: Settings) -> Runner:
    """TFP's ``lbfgs_minimize`` on the whole batch (JAX substrate), objective masked.

    The batch is TFP's own: ``value_and_gradients_function`` takes ``(B, n)``, and each
    row is tested for convergence (sup-norm of the gradient <= ``tolerance``) and
    frozen once converged; the loop runs until every row has. TFP reports one iteration
    count for the batch. No bounds; fixed entries get a zero gradient from
    ``where + stop_gradient`` and are not projected afterwards.
    """
    if problem.bounds is not None:
        raise Skipped("TFP's lbfgs_minimize has no bounds")
    tfp = _import("tfp", "pip install tfp-nightly (stable 0.25 does not import with jax 0.10)")

    def masked(x, x0, fixed, *args):
        return problem.jax_fun(jnp.where(fixed, jax.lax.stop_gradient(x0), x), *args)

    value_and_grad = jax.vmap(jax.value_and_grad(masked))

    def solve(x0, fixed, *args):
        result = tfp.optimizer.lbfgs_minimize(
            lambda x: value_and_grad(x, x0, fixed, *args),
            initial_position=x0,
            tolerance=settings.gtol,
            max_iterations=settings.max_steps,
            num_correction_pairs=HISTORY,
        )
        return result.position, result.objective_value, result.num_iterations, result.converged

    x0, fixed, args = device_inputs(problem)
    note = "TFP: one iteration count for the whole batch (steps = the batch's)"
    return compiled_runner(
        jax.jit(solve), (x0, fixed, *args), lambda out: as_row_results(*out), notes=(note,)
    )
