"""``where``: the rows of a batch to solve (NumPy's ``where=`` of ufuncs). The other
rows are not solved and spend no lane: the solve runs on the rows taken out of the
batch (one gather of each per-row input, a mask known at trace time), and its results
are scattered back, the rows left out reporting :attr:`fixedopt.Status.SKIPPED` with
NaN in their free entries (their fixed entries keep their values), a NaN ``value``
and ``grad_norm``, and 0 steps. Background voxels of a map, rows already fitted."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._contract.status import Reason, Status
from fixedopt._driver.engine import run
from fixedopt._driver.plan import Inputs, Plan
from fixedopt._inputs.validate import concrete_or_none
from fixedopt._results.solution import Solution


def where_rows(where: Any, plan: Plan, inputs: Inputs) -> np.ndarray | None:
    """The indices of the rows to solve, or None for all of them; a ``TypeError`` or
    ``ValueError`` naming ``where`` for a mask that is not a concrete boolean ``(B,)``
    of a batched solve."""
    if where is None:
        return None
    if plan.batched_args is None:
        raise ValueError("`where` (the rows to solve) needs batched=True: remove it")
    mask = concrete_or_none(where)
    if mask is None:
        raise TypeError(
            "`where` must be known at trace time (a NumPy array, or a concrete JAX one): "
            "it sets which rows the solve takes; for a traced mask, fix every entry of the "
            "rows to leave (fixed=True on them)"
        )
    if mask.dtype != bool:
        if mask.dtype.kind not in "iu" or not np.all((mask == 0) | (mask == 1)):
            raise TypeError(f"`where` must be boolean (True = solve the row), got {mask.dtype}")
        mask = mask.astype(bool)
    batch = jax.tree.leaves(inputs.x0)[0].shape[0]
    if mask.shape != (batch,):
        raise ValueError(
            f"`where` must have shape ({batch},), one flag per row, got {tuple(mask.shape)}"
        )
    return None if mask.all() else np.flatnonzero(mask)


def _take(tree: Any, index: np.ndarray) -> Any:
    return jax.tree.map(lambda leaf: leaf[index], tree)


def take_rows(plan: Plan, inputs: Inputs, index: np.ndarray) -> Inputs:
    """The inputs of the rows ``index``: every per-row leaf gathered (the shared
    leaves of ``args`` and the stopping rules as they are)."""
    flags = iter(plan.batched_args or ())
    args = jax.tree.map(lambda leaf: leaf[index] if next(flags) else leaf, inputs.args)
    per_row = (inputs.x0, inputs.fixed, inputs.fixed_values, inputs.bounds)
    x0, fixed, values, bounds = _take(per_row, index)
    sigma, counts, split = _take((inputs.sigma, inputs.counts, inputs.split_index), index)
    return inputs._replace(x0=x0, fixed=fixed, fixed_values=values, bounds=bounds,
                           args=args, sigma=sigma, counts=counts, split_index=split)  # fmt: skip


def _placed(full: jax.Array, index: np.ndarray, rows: jax.Array) -> jax.Array:
    return full.at[index].set(rows.astype(full.dtype))


def _skipped(inputs: Inputs) -> Solution:
    """Every row as left out: SKIPPED, NaN where free, its fixed values where fixed."""
    x = jax.tree.map(lambda fixed, values: jnp.where(fixed, values, jnp.nan),
                     inputs.fixed, inputs.fixed_values)  # fmt: skip
    batch = jax.tree.leaves(inputs.x0)[0].shape[0]
    dtype = jnp.result_type(*jax.tree.leaves(inputs.x0))
    nan = jnp.full((batch,), jnp.nan, dtype)
    status = jnp.full((batch,), Status.SKIPPED, jnp.int32)
    return Solution(
        x=x, value=nan, grad_norm=nan, steps=jnp.zeros((batch,), jnp.int32),
        converged=jnp.zeros((batch,), bool), status=status,
        reason=jnp.full((batch,), Reason.NONE, jnp.int32), fixed=inputs.fixed,
        bounds=inputs.bounds, at_bound=jax.tree.map(jnp.zeros_like, inputs.fixed),
    )  # fmt: skip


def run_rows(plan: Plan, inputs: Inputs, index: np.ndarray | None) -> Solution:
    """The solve of the rows ``index`` (all: None), the others left out (SKIPPED)."""
    if index is None:
        return run(plan, inputs)
    skipped = _skipped(inputs)
    if index.size == 0:
        return skipped
    lanes = None if plan.lanes is None else min(plan.lanes, int(index.size))
    solved = run(plan._replace(lanes=lanes), take_rows(plan, inputs, index))
    fields = ("x", "value", "grad_norm", "steps", "converged", "status", "reason", "at_bound")
    placed = {
        name: jax.tree.map(
            lambda full, rows: _placed(full, index, rows),
            getattr(skipped, name),
            getattr(solved, name),
        )
        for name in fields
    }
    if solved.normal is not None:  # a left-out row's: NaN
        nan = jnp.full((skipped.status.shape[0], *solved.normal.shape[1:]), jnp.nan,
                       solved.normal.dtype)  # fmt: skip
        placed["normal"] = _placed(nan, index, solved.normal)
    return skipped._replace(**placed)
