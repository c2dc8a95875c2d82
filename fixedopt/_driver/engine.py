"""The compiled core of ``minimize`` / ``least_squares``: one row's setup, the loop,
and the way back to the user's pytree, with the derivative rule of the solve's
:class:`~fixedopt._derivatives.differentiation.Differentiation` applied."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from fixedopt._contract.status import Status
from fixedopt._derivatives.differentiation import captured_values
from fixedopt._derivatives.implicit import DerivativeProblem
from fixedopt._driver import after_loop, ahead, batching, cache, machine
from fixedopt._driver.lane_layout import LastState
from fixedopt._driver.lanes import iterate_lanes
from fixedopt._driver.loop import LoopState, Resume, iterate
from fixedopt._driver.machine import Schedule
from fixedopt._driver.plan import Inputs, Plan
from fixedopt._fixing.mask import active_set, unravel_mask
from fixedopt._inputs.validate import PyTree
from fixedopt._numerics import cpu_compiler, kernels, stored
from fixedopt._numerics.trace_state import at_top_level
from fixedopt._objective.call_note import passed_as
from fixedopt._objective.fit_data import Weighted
from fixedopt._objective.problem import (
    Objective,
    RowData,
    differentiable_gradient,
    differentiable_objective,
    flatten_row,
    vectorized_objective,
)
from fixedopt._objective.problem import objective as make_objective
from fixedopt._objective.reparam import expand
from fixedopt._results.solution import Solution
from fixedopt._solvers import small_linalg

Result = tuple[PyTree, jax.Array, jax.Array, PyTree]  # (x, value, grad_norm, at_bound) of a row


def run(plan: Plan, inputs: Inputs) -> Solution:
    """The solve, compiled once per plan and per shapes: with the XLA options of
    :mod:`fixedopt._driver.compiler` where they apply (a least-squares solver called
    at the top level on the CPU), else without; masks and values are data, and so is
    the batch size (:mod:`fixedopt._driver.batching`). The
    :class:`~fixedopt._results.solution.Solution` carries the solve's own mask and
    bounds. The first solve of a process turns on the persistent compilation cache
    (:mod:`fixedopt._driver.cache`). How it runs on this machine is the solve's one
    :class:`~fixedopt._driver.machine.Schedule`, made here; everything is traced at its
    matmul precision: the solve and its derivatives, also those a transformation
    outside traces from it."""
    cache.use_default_cache()
    schedule = machine.schedule(plan.solver, plan.lanes, plan.backend)
    with machine.traced_at(schedule.precision):
        if plan.differentiate.rule_after_solve and not at_top_level():
            solution = _solve_then_differentiate(plan, schedule, inputs)
        else:
            solution = _run_compiled(plan, schedule, inputs)
    return solution._replace(fixed=inputs.fixed, bounds=inputs.bounds)


def _solve_then_differentiate(plan: Plan, schedule: Schedule, inputs: Inputs) -> Solution:
    """Under a transformation: the solve on stopped inputs, then the derivative rule
    (:func:`_with_derivatives`, a program of its own). Under ``jax.grad`` or
    ``jax.jvp`` alone the stopped inputs are concrete: the solve is then the plain
    call's own program (options, padded rows, caches), run at the top level."""
    passed = passed_as(plan.fun)  # the argument the user passed, in their call's words
    plan.differentiate.check_captures(plan.fun, passed.name, passed.inputs)
    stopped = plan.differentiate.stop(inputs)
    leaves = jax.tree.leaves(stopped) + [v for _, v in captured_values(plan.fun)]
    if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
        solution = _run_compiled(plan, schedule, stopped)
    else:
        with jax.core.eval_context():  # the top level: what a plain call compiles
            solution = _run_compiled(plan, schedule, stopped)
    differentiated: Solution = _with_derivatives(plan, inputs, solution)
    return differentiated


def _run_compiled(plan: Plan, schedule: Schedule, inputs: Inputs) -> Solution:
    """The compiled solve of :func:`run` (its derivative rule inside, if any), a batch
    in the compiled sizes of :mod:`fixedopt._driver.batching`; with the schedule's
    compiler options where nothing traces around the call (jit refuses options on a
    nested program)."""

    def solve(inputs: Inputs) -> Solution:
        return batching.solve_rows(_compiled_with, plan, schedule, inputs)

    if after_loop.applies(plan, inputs):  # claims of CONVERGED checked after the loop
        rows_for = functools.partial(batching.rows_for, plan, schedule, inputs)
        return after_loop.solve_checked(solve, _set_up, plan, schedule, inputs, rows_for)
    return solve(inputs)


def _compiled_with(schedule: Schedule) -> batching.Compiled:
    """The jit function that compiles ``schedule``'s solve: with its XLA options where
    it has some and nothing traces around the call (jit refuses options on a nested
    program)."""
    tuned = bool(schedule.compiler_options) and at_top_level()
    return _compiled_for_cpu if tuned else _compiled


def compiled_programs() -> int:
    """Programs compiled so far for solves (a CPU block's tail as its export:
    :mod:`fixedopt._driver.ahead`). ``_cache_size`` is jit's own count: private,
    so the stubs of ``jax.jit``'s result (``JitWrapped``) do not list it."""
    own: int = _compiled._cache_size()  # type: ignore[attr-defined]
    return own + _compiled_for_cpu._cache_size() + ahead.compiled_programs()


def clear_compiled() -> None:
    """Drop every compiled solve."""
    _compiled.clear_cache()  # type: ignore[attr-defined]
    _compiled_for_cpu.clear_cache()
    ahead.forget()


def _solve(plan: Plan, schedule: Schedule, inputs: Inputs) -> Solution:
    """The traced solve.

    ``plan.batched_args`` is None for one problem, else one flag per leaf of ``args``:
    True for a per-row array, False for a value shared by all rows. The solution's
    ``fixed`` and ``bounds`` are left None for :func:`run` to attach: the inputs
    themselves (a compiled program would return copies of them).
    """
    with kernels.using(schedule.defaults.kernels):
        return _solve_traced(plan, schedule, inputs)


def _solve_traced(plan: Plan, schedule: Schedule, inputs: Inputs) -> Solution:
    """:func:`_solve`'s trace, inside its schedule's kernels."""
    solver, stopping = plan.solver, inputs.stopping
    objective, rows = _set_up(plan, inputs)
    finish = functools.partial(_finish, objective)
    normal_of = _normal_of(plan, inputs)
    if plan.batched_args is None:
        start = objective.start(rows)
        problem = objective.problem(rows)
        final = iterate(solver, problem, start, stopping, plan.max_trips, inputs.resume)
        normal = None if normal_of is None else normal_of(final.solver_state)
        return _solution(final, finish(rows, final), normal)

    start = jax.vmap(objective.start)(rows)
    rows_final: LoopState | LastState
    if plan.differentiate.through_lanes:
        # The lanes carry the rows' data round the loop: as the solver sees them
        # (stopped under Implicit), or their tangents go round it too (a jvp of the
        # whole loop body, which XLA compiles and runs for nothing).
        rows_final = iterate_lanes(
            solver,
            objective.problem,
            plan.differentiate.stop(rows),
            start,
            stopping,
            schedule,
            plan.progress,
            inputs.batch,
            _step_bytes(objective, start),
            inputs.resume,
            normal_of,
            _start_in_step(objective, schedule),
        )
        normal = rows_final.solver_state  # the report's J^T J (LastState)
    else:

        def one(row: RowData, x: jax.Array, resume: Resume | None) -> LoopState:
            return iterate(solver, objective.problem(row), x, stopping, plan.max_trips, resume)

        rows_final = jax.vmap(one)(rows, start, inputs.resume)
        normal = None if normal_of is None else normal_of(rows_final.solver_state)
    return _solution(rows_final, jax.vmap(finish)(rows, rows_final), normal)


def _normal_of(plan: Plan, inputs: Inputs) -> Callable[[Any], Any] | None:
    """``solver_state -> J^T J`` at the row's ``x`` (:meth:`Solver.normal_matrix`),
    where the plan asks for it (``curve_fit``'s covariance) and it is the matrix of
    the residuals as given: plain squares (no robust loss, no Poisson likelihood),
    every entry in the solver's vector (not ``strategy="split"``); else None."""
    plain = plan.least_squares and plan.loss is None and inputs.split_index is None
    return plan.solver.normal_matrix if plan.normal and plain else None


def _start_in_step(objective: Objective, schedule: Schedule) -> bool:
    """Whether the lanes start their rows in their next trip, on its evaluation
    (:mod:`fixedopt._driver.shared_start`): a least-squares model with a loop or at least
    ``Backend.start_in_step_residuals`` residuals, whose evaluation dominates a step."""
    least = schedule.defaults.start_in_step_residuals
    if not objective.least_squares or least <= 0:
        return False
    return objective.loops or math.prod(objective.output_shape) >= least


def _step_bytes(objective: Objective, x: jax.Array) -> int:
    """What a step of one row holds in memory beyond its data and loop state, in bytes:
    a least-squares row's residuals and Jacobian (``m (n + 1)`` values), unless the step
    sums them as they are made (a few columns: ``small_linalg.sums_together``) from a
    model of straight-line code (one with a loop, an ODE integrator's ``scan``, makes
    its Jacobian in memory). None counted for ``minimize``: its gradient is in the
    loop state. Measured: ``docs/decisions.md``, "One compiled solve for every batch size"."""
    if not objective.least_squares:
        return 0
    m, n = math.prod(objective.output_shape), x.shape[-1]
    fused = small_linalg.sums_together(jax.ShapeDtypeStruct((m, n), x.dtype))
    return 0 if fused and not objective.loops else m * (n + 1) * x.dtype.itemsize


_compiled = jax.jit(_solve, static_argnums=(0, 1))
# A plan that names itself before a trace (a fit of fixedopt.models' built-in
# lineshapes: fixedopt._numerics.program_names) runs in a new process from its export,
# untraced (fixedopt._numerics.stored); any other plan through jit, as before.
_compiled_for_cpu = stored.StoredJit(_solve, (0, 1), dict(cpu_compiler.CPU_OPTIONS), named=True)
ahead.register(_compiled, None)  # a CPU block's tail: compiled ahead as an export
ahead.register(_compiled_for_cpu, cpu_compiler.CPU_OPTIONS)


def _set_up(plan: Plan, inputs: Inputs) -> tuple[Objective, RowData]:
    """Each row set up once: the rows' flat :class:`~fixedopt._objective.problem.RowData` and one
    :class:`~fixedopt._objective.problem.Objective` (``fun``'s output checked once), which makes
    a row's Problem from its data wherever the loop needs it. Shared ``args`` leaves
    stay unbatched: the objective closes over them."""
    fun, args, per_row_flags = _with_data(plan, inputs)
    leaves, treedef = jax.tree.flatten(args)
    batched = per_row_flags is not None
    per_row = per_row_flags or (False,) * len(leaves)
    row_leaves = [leaf for leaf, row in zip(leaves, per_row) if row]
    shared = [leaf for leaf, row in zip(leaves, per_row) if not row]
    x0 = inputs.x0
    data = (x0, inputs.fixed, inputs.fixed_values, inputs.bounds, inputs.split_index, row_leaves)
    rows: RowData = jax.vmap(flatten_row)(*data) if batched else flatten_row(*data)

    def merge_args(row_args: tuple[Any, ...], shared: tuple[Any, ...]) -> tuple[Any, ...]:
        row_leaves, shared_leaves = iter(row_args), iter(shared)
        merged = [next(row_leaves if row else shared_leaves) for row in per_row]
        return tuple(jax.tree.unflatten(treedef, merged))

    def args_of(row_args: tuple[Any, ...]) -> tuple[Any, ...]:
        return merge_args(row_args, tuple(shared))

    one_row = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape[batched:], a.dtype), rows)
    # One row's structure, for unravel (shapes only: a batch may have no rows).
    x0_row = jax.tree.map(lambda a: jnp.zeros(a.shape[1:], a.dtype), x0) if batched else x0
    kind, differentiate = (plan.least_squares, plan.loss), plan.differentiate
    if plan.vectorized:
        shared_args = tuple(shared)
        objective = vectorized_objective(
            fun, *kind, x0_row, differentiate, one_row, shared_args, merge_args
        )
    else:
        objective = make_objective(fun, *kind, x0_row, args_of, differentiate, one_row)
    return objective, rows


def _with_data(plan: Plan, inputs: Inputs) -> tuple[Callable[..., Any], tuple[Any, ...], Any]:
    """The function the objective calls, its ``args``, and their per-row flags (None
    without a batch): a fit's ``sigma`` and ``counts`` ride at the end of ``args``
    (per row in a batch), so that new data reuse the compiled solve, and ``sigma``
    divides the residuals (:class:`~fixedopt._objective.fit_data.Weighted`)."""
    data = tuple(leaf for leaf in (inputs.sigma, inputs.counts) if leaf is not None)
    flags = plan.batched_args
    if flags is not None:
        flags = (*flags, *(True,) * len(data))
    fun = plan.fun if inputs.sigma is None else Weighted(plan.fun)
    return fun, (*inputs.args, *data), flags


def _finish(objective: Objective, data: RowData, final: LoopState | LastState) -> Result:
    """``(x, value, grad_norm, at_bound)`` of a row's final loop state, in the user's
    pytree; ``at_bound`` is the row's :func:`~fixedopt._fixing.mask.active_set` at ``x``,
    from the loop's last gradient.

    The derivatives are those of ``objective.differentiate.solution``: with
    ``Implicit`` the solver ran on stopped inputs and the implicit derivatives are
    attached here; with ``Unroll`` the loop's own outputs carry theirs.
    """
    flat_x, grad = final.x, final.grad
    if data.split_index is not None:  # packed variables: back to the full vector
        values = jax.lax.stop_gradient(data.fixed_values)
        flat_x = expand(flat_x, values, data.split_index)
        grad = expand(grad, jnp.zeros_like(values), data.split_index)
    active = jnp.zeros_like(data.fixed)
    if data.lower is not None and data.upper is not None:
        active = active_set(flat_x, grad, data.fixed, data.lower, data.upper)
    x, value, grad_norm = flat_x, final.value, final.grad_norm
    if not objective.differentiate.rule_after_solve:  # else: see _with_derivatives
        problem = _derivative_problem(objective, data, active)._replace(start=data.x0)
        x, value, grad_norm = objective.differentiate.solution((x, value, grad_norm), problem)
    tree = objective.unravel(x)
    return tree, value, grad_norm, unravel_mask(active, tree)


@functools.partial(jax.jit, static_argnums=0)
def _with_derivatives(plan: Plan, inputs: Inputs, solution: Solution) -> Solution:
    """``solution``, of a solve on stopped inputs, with the derivatives of
    ``plan.differentiate.solution`` with respect to ``inputs``: each row's rule at its
    ``x`` and active set (``at_bound``), from the row's data as given."""
    objective, rows = _set_up(plan, inputs)

    def one(data: RowData, x: PyTree, value: jax.Array, grad_norm: jax.Array, at: PyTree) -> Any:
        problem = _derivative_problem(objective, data, ravel_pytree(at)[0])
        found = (ravel_pytree(x)[0], value, grad_norm)
        flat_x, value, grad_norm = objective.differentiate.solution(found, problem)
        return objective.unravel(flat_x), value, grad_norm

    found = (solution.x, solution.value, solution.grad_norm, solution.at_bound)
    batched = plan.batched_args is not None
    x, value, grad_norm = jax.vmap(one)(rows, *found) if batched else one(rows, *found)
    return solution._replace(x=x, value=value, grad_norm=grad_norm)


def _derivative_problem(
    objective: Objective, data: RowData, active: jax.Array
) -> DerivativeProblem:
    """The row as a derivative rule sees it: the objective with its fixed entries read
    from the (not stopped) fixed values, its args, mask, bounds and active set."""
    shape = (objective.loss, objective.unravel, objective.vectorized)
    function = differentiable_objective(objective.fun, objective.least_squares, *shape)
    gradient = None  # the rule takes jax.grad of the objective
    if (
        objective.least_squares
        and data.fixed.shape[0] <= objective.differentiate.forward_gradient_up_to()
    ):
        gradient = differentiable_gradient(objective.fun, *shape)
    row_args = data.row_args
    if objective.vectorized:  # fun sees this row as a batch of one
        row_args = jax.tree.map(lambda a: a[None], row_args)
    args = objective.args_of(row_args)
    return DerivativeProblem(
        function,
        args,
        data.fixed,
        data.fixed_values,
        data.lower,
        data.upper,
        active,
        gradient=gradient,
    )


def _solution(
    final: LoopState | LastState, result: Result, normal: jax.Array | None = None
) -> Solution:
    x, value, grad_norm, at_bound = result
    return Solution(
        x=x,
        value=value,
        grad_norm=grad_norm,
        steps=final.steps,
        converged=final.status == Status.CONVERGED,
        status=final.status,
        reason=final.reason,
        fixed=None,  # attached by run
        bounds=None,
        at_bound=at_bound,
        normal=None if normal is None else jax.lax.stop_gradient(normal),
    )
