"""Claims of CONVERGED checked after the loop, in a small program of their own.

A row whose verdict the driver checks (``fixedopt._driver.loop.to_certify``: every
CONVERGED verdict of a solver that certifies them, a start that met a test, a row
after a rejected claim) leaves the loop CLAIMED. After the loop, :func:`solve_checked`
gives the claiming rows, a chunk of ``CHUNK`` at a time, to one program
(:func:`_check_rows`) that runs ``fixedopt._driver.loop.certify`` on each (the true
Hessian's test, as inside the loop before): a claim that holds is CONVERGED; a row
shown wrong is left along the check's step to a lower point (a step, counted; a row
that spends its ``max_steps`` so is evaluated there by the loop, which it leaves
MAX_STEPS), or is STALLED where none is lower. The rows left so go on through the same compiled loop
program, a second pass of the whole batch in which every other row takes no step
(its :class:`~fixedopt._driver.loop.Resume` says ``max_steps`` are spent, and its
result of that pass is dropped), each going on from its steps, ``f(x0)`` and the
value of its rejected claim.

So the loop's program holds no second derivative of the objective, and the check's
program is compiled only by a call where some row claims; a row's check reads its own
data and point only (independent of its neighbours and of the chunk it is in). It
compiles with the machine profile's options for it (``Schedule.check_options``: on the
CPU XLA:CPU's elemental emitter, also for ``minimize``'s solvers, whose loops keep
XLA's defaults; ``fixedopt._numerics.backends.Backend.tuned_check``).
Inside a transformation (traced inputs, or a function closing over traced values)
and for ``strategy="split"`` the claims are checked inside the loop, as before
(``fixedopt._driver.lanes``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from fixedopt._contract.status import CLAIMED, RUNNING, Reason, Status
from fixedopt._derivatives.differentiation import captured_values
from fixedopt._driver import ahead
from fixedopt._driver.loop import LoopState, Resume, certifies, certify
from fixedopt._driver.machine import Schedule
from fixedopt._driver.plan import Inputs, Plan
from fixedopt._numerics import cpu_compiler
from fixedopt._numerics.trace_state import at_top_level
from fixedopt._results.solution import Solution

# Rows a call of the check program takes: one compiled size whatever the number of
# claims (a chunk's unused rows check copies of its first).
CHUNK = 128
# Passes of the loop at most; a row still claiming after them (shown wrong each time,
# each time lower) is STALLED.
PASSES = 64

SetUp = Callable[[Plan, Inputs], tuple[Any, Any]]  # engine._set_up: (objective, rows)


class Verdict(NamedTuple):
    """What the check says of each claiming row."""

    x: Any  # the point to go on from (the user's pytree; the claim's own where it holds)
    status: jax.Array  # CONVERGED (holds), RUNNING (left: goes on), STALLED, MAX_STEPS
    reason: jax.Array
    steps: jax.Array
    doubted: jax.Array
    initial_value: jax.Array


def applies(plan: Plan, inputs: Inputs) -> bool:
    """Whether the claims of this solve are checked after its loop: its inputs and the
    arrays its function closes over are concrete (nothing traces around the call), and
    its rows are not packed (``strategy="split"``)."""
    if inputs.split_index is not None:
        return False
    leaves = jax.tree.leaves(inputs) + [value for _, value in captured_values(plan.fun)]
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in leaves)


def fresh(plan: Plan, inputs: Inputs) -> Resume:
    """Every row's :class:`Resume` of a first pass: 0 steps, never doubted, ``f(x0)``
    its own."""
    shape = _rows_shape(plan, inputs)
    dtype = np.asarray(inputs.stopping.precision).dtype
    # NumPy's: arrays made here would each compile a small program.
    steps = np.zeros(shape, np.int32)
    return Resume(steps, np.full(shape, np.inf, dtype), np.full(shape, np.nan, dtype))  # type: ignore[arg-type]


def solve_checked(
    solve: Callable[[Inputs], Solution],
    set_up: SetUp,
    plan: Plan,
    schedule: Schedule,
    inputs: Inputs,
    rows_for: Callable[[int], int],
) -> Solution:
    """``solve(inputs)`` with each claim of CONVERGED checked after the loop and the
    rows shown wrong solved on (the module's rules); ``set_up`` makes the rows'
    objective (``fixedopt._driver.engine._set_up``); the check compiles with the
    ``schedule``'s options for it (:func:`_check_program`); ``rows_for(k)``: how many
    rows a batch of ``k`` rows to solve on must have to run through the program of the
    first pass (``fixedopt._driver.batching.rows_for``; filled with rows that take no
    step)."""
    resume = fresh(plan, inputs)
    program = _check_program(schedule)
    if certifies(plan.solver) and _rows_shape(plan, inputs) != (0,):
        _check_ahead(program, set_up, plan, inputs, resume)  # nearly every row claims
    solution = solve(inputs._replace(resume=resume))
    batched = plan.batched_args is not None
    max_steps = int(np.asarray(inputs.stopping.max_steps))
    for _ in range(PASSES):
        claimed = np.flatnonzero(np.asarray(solution.status).reshape(-1) == CLAIMED)
        if claimed.size == 0:
            return solution
        verdict = _check(program, set_up, plan, inputs, solution, resume, claimed)
        # A row left along the check's step is evaluated there by the loop: one that
        # goes on, and one whose step spent its max_steps (it takes no other).
        moved = np.asarray(verdict.steps) != _rows(solution.steps, claimed, batched)
        going = np.asarray(verdict.status == RUNNING) | moved
        solution = _put(solution, claimed[~going], batched, status=verdict.status[~going],
                        reason=verdict.reason[~going])  # fmt: skip
        rerun = claimed[going]
        if rerun.size == 0:
            return solution
        steps = np.full_like(resume.steps, max_steps)  # the other rows: no step
        resume = Resume(
            _set(steps, rerun, verdict.steps[going], batched),
            _set(resume.doubted, rerun, verdict.doubted[going], batched),
            _set(resume.initial_value, rerun, verdict.initial_value[going], batched),
        )
        x0 = jax.tree.map(functools.partial(_set_from, rerun, going, batched), inputs.x0,
                          verdict.x)  # fmt: skip
        again_inputs = inputs._replace(x0=x0, resume=resume)
        count = rows_for(rerun.size) if batched else 0
        if batched and count < len(steps):  # the rows to solve on, then rows that take no step
            index = np.concatenate([rerun, np.full(count - rerun.size, rerun[0])])
            filler = np.arange(count) >= rerun.size
            sub = _take(plan, again_inputs, index, keep_resume=True)
            taken: Any = sub.resume
            again = solve(sub._replace(resume=taken._replace(
                steps=np.where(filler, max_steps, taken.steps))))  # fmt: skip
            place = functools.partial(_set_first, rerun)
        else:
            again = solve(again_inputs)
            place = functools.partial(_set_rows, rerun, batched)
        solution = jax.tree.map(place, solution, again)
    status = np.asarray(solution.status)
    stalled = np.flatnonzero(status.reshape(-1) == CLAIMED)
    count = stalled.size
    return _put(solution, stalled, batched, status=np.full(count, Status.STALLED, np.int32),
                reason=np.full(count, Reason.NONE, np.int32))  # fmt: skip


def _rows_shape(plan: Plan, inputs: Inputs) -> tuple[int, ...]:
    if plan.batched_args is None:
        return ()
    return (jax.tree.leaves(inputs.x0)[0].shape[0],)


def _set_from(index: np.ndarray, chosen: np.ndarray, batched: bool, a: Any, b: Any) -> Any:
    """``a`` with the ``chosen`` rows of ``b`` at its rows ``index``."""
    return _set(a, index, np.asarray(b)[chosen], batched)


def _set_first(index: np.ndarray, a: Any, b: Any) -> Any:
    """``a`` with ``b``'s first rows at its rows ``index``."""
    return _set(a, index, np.asarray(b)[: index.size], True)


def _set_rows(index: np.ndarray, batched: bool, a: Any, b: Any) -> Any:
    """``a`` with ``b``'s rows ``index`` at the same rows."""
    return _set(a, index, _rows(b, index, batched), batched)


def _rows(a: Any, index: np.ndarray, batched: bool) -> Any:
    """The rows ``index`` of ``a`` (the one row of an unbatched solve)."""
    a = np.asarray(a)
    return a[index] if batched else a[None]


def _set(a: Any, index: np.ndarray, values: Any, batched: bool) -> Any:
    """``a`` with ``values`` at its rows ``index`` (a new array; ``a`` unchanged where
    ``index`` is empty)."""
    if index.size == 0:
        return a
    if not batched:
        return np.asarray(np.asarray(values)[0], np.asarray(a).dtype)
    out = np.array(a)
    out[index] = np.asarray(values)
    return out


def _put(solution: Solution, index: np.ndarray, batched: bool, status: Any,
         reason: Any) -> Solution:  # fmt: skip
    """``solution`` with the rows ``index`` given their final status and reason."""
    new_status = _set(solution.status, index, status, batched)
    return solution._replace(
        status=new_status,
        reason=_set(solution.reason, index, reason, batched),
        converged=_set(solution.converged, index, status == Status.CONVERGED, batched),
    )


def _check(program: Any, set_up: SetUp, plan: Plan, inputs: Inputs, solution: Solution,
           resume: Resume, claimed: np.ndarray) -> Verdict:  # fmt: skip
    """The :class:`Verdict` of the rows ``claimed`` (host arrays, their order), in
    chunks of ``CHUNK`` rows through one compiled ``program`` (:func:`_check_program`)."""
    batched = plan.batched_args is not None
    parts = []
    for first in range(0, claimed.size, CHUNK if batched else 1):
        rows = claimed[first : first + CHUNK]
        index = np.resize(rows, CHUNK) if batched else rows
        chunk = _take(plan, inputs, index)
        taken = functools.partial(_take_rows, index, batched)
        scalars = (solution.value, solution.steps, solution.reason, *resume[1:])
        claim = (jax.tree.map(taken, solution.x), *map(taken, scalars))
        if not batched:
            claim = jax.tree.map(lambda a: a[0], claim)
        ahead.wait(program, set_up, plan, (chunk, claim))
        verdict = program(set_up, plan, (chunk, claim))
        parts.append(jax.tree.map(functools.partial(_first, rows.size, batched), verdict))
    joined: Verdict = jax.tree.map(lambda *a: np.concatenate(a), *parts)
    return joined


def _take_rows(index: np.ndarray, batched: bool, a: Any) -> Any:
    """:func:`_rows` with the leaf last (for ``jax.tree.map``)."""
    return _rows(a, index, batched)


def _first(count: int, batched: bool, a: Any) -> Any:
    """The first ``count`` rows of a chunk's verdict ``a`` (one problem's as one row)."""
    a = np.asarray(a)
    return (a if batched else a[None])[:count]


def _take(plan: Plan, inputs: Inputs, index: np.ndarray, keep_resume: bool = False) -> Inputs:
    """The inputs of the rows ``index`` (a batch), or ``inputs`` (one problem); their
    :class:`Resume` too with ``keep_resume``, else None."""
    if plan.batched_args is None:
        return inputs._replace(resume=None)

    def take(a: Any) -> Any:
        return None if a is None else jax.tree.map(lambda leaf: np.asarray(leaf)[index], a)

    leaves, tree = jax.tree.flatten(inputs.args)
    flags = plan.batched_args
    args = jax.tree.unflatten(tree, [np.asarray(leaf)[index] if row else leaf
                                     for leaf, row in zip(leaves, flags)])  # fmt: skip
    return inputs._replace(x0=take(inputs.x0), fixed=take(inputs.fixed),
                           fixed_values=take(inputs.fixed_values), bounds=take(inputs.bounds),
                           sigma=take(inputs.sigma), counts=take(inputs.counts), args=args,
                           batch=None, resume=take(inputs.resume) if keep_resume else None)  # fmt: skip  # noqa: E501


def _check_ahead(program: Any, set_up: SetUp, plan: Plan, inputs: Inputs,
                 resume: Resume) -> None:  # fmt: skip
    """The check's ``program`` compiled in a thread (``fixedopt._driver.ahead``) while the
    loop's compiles and runs, for the claims of a solver that certifies its verdicts
    (at its rows' starts: the types of a real chunk's)."""
    batched = plan.batched_args is not None
    index = np.zeros(CHUNK if batched else 1, np.int64)
    taken = functools.partial(_take_rows, index, batched)
    value = taken(resume.doubted)
    claim = (jax.tree.map(taken, inputs.x0), value, taken(resume.steps),
             np.zeros(value.shape, np.int32), value, taken(resume.initial_value))  # fmt: skip
    if not batched:
        claim = jax.tree.map(lambda a: a[0], claim)
    ahead.start(lambda: None, program, set_up, plan, (_take(plan, inputs, index), claim))


def _check_program(schedule: Schedule) -> Any:
    """The check's ``jit``: with the ``schedule``'s options for it
    (``Schedule.check_options``: the CPU's options or none, as the solve's) where
    nothing traces around it (jit refuses options on a nested program), else XLA's
    defaults."""
    tuned = bool(schedule.check_options) and at_top_level()
    return _check_tuned if tuned else _check_plain


def _check_rows(set_up: SetUp, plan: Plan, chunk: tuple[Inputs, tuple[Any, ...]]) -> Verdict:
    """The check of a chunk of claims (``claim``: each row's ``x``, value, steps, reason,
    doubted value and ``f(x0)``, NaN: its own start's): ``fixedopt._driver.loop.certify``
    after the loop."""
    inputs, claim = chunk
    objective, rows = set_up(plan, inputs)
    solver, stopping = plan.solver, inputs.stopping

    def one(row: Any, x: Any, value: jax.Array, steps: jax.Array, reason: jax.Array,
            doubted: jax.Array, initial: jax.Array) -> Verdict:  # fmt: skip
        problem = objective.problem(row)
        flat = ravel_pytree(x)[0]
        start = problem.value_and_grad(problem.project(objective.start(row)))[0]
        initial = jnp.where(jnp.isnan(initial), start, initial.astype(start.dtype))
        value, grad, solver_state = solver.start(problem, flat)
        state = LoopState(flat, value, grad, problem.grad_norm(flat, grad), steps,
                          jnp.asarray(Status.CONVERGED, jnp.int32), reason,
                          jnp.asarray(jnp.inf, value.dtype), initial,
                          doubted.astype(value.dtype), solver_state,
                          jnp.zeros((), jnp.int32))  # fmt: skip
        checked = certify(solver, problem, state, stopping, after=True)
        return Verdict(objective.unravel(checked.x), checked.status, checked.reason,
                       checked.steps, checked.doubted, checked.initial_value)  # fmt: skip

    if plan.batched_args is None:
        alone: Verdict = one(rows, *claim)
        return alone
    verdict: Verdict = jax.vmap(one)(rows, *claim)
    return verdict


# The check's two jits, XLA's defaults and the CPU's options (:func:`_check_program`).
_check_jits = cpu_compiler.jit_for_cpu(_check_rows, (0, 1))
_check_plain, _check_tuned = _check_jits.plain, _check_jits.tuned
