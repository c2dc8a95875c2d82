"""A batch through lanes called at the top level: run as rows of one compiled size.

A compiled program is specialised to its arrays' shapes, so each new batch size would
compile the whole solve again (seconds), although the lanes' loop body does not depend
on the batch size ``B`` (:mod:`fixedopt._driver.lanes`). So the rows are given to the
compiled solve in a size that ``B`` does not set, padded with copies of row 0, the true
count travelling as data (the lanes never take a padded row; :mod:`fixedopt._numerics.buckets`):

- **a batch of at most 8 rows, padded to 8**: its rows all in lanes from the start (one
  ``vmap``), the padded ones take their steps (copies of row 0, as many as it takes);
- **on the CPU, blocks of one size per model** (:func:`fixedopt._driver.lanes.block_rows`,
  from the bytes of a row's data): every batch of more than 8 rows runs through the
  same program, a batch larger than a block as several calls of it, their rows joined
  on the host (whose memory is the device's). The block holds at least 8 rows for each
  of the default lanes, so the lanes are as wide as for a batch of any size, and a
  block's last, slow rows overlap with others as in one long queue (measured: 4 blocks
  of the Gaussian spot, 8 of quad n = 64, the same time as one batch of their rows);
- **elsewhere, the next power of two** (:func:`fixedopt._numerics.buckets.bucket`): an
  accelerator's lanes grow with the batch (its trips cost about the same whatever
  their width), so a batch is one call, compiled once for each bucket.

So a model compiles two solves on the CPU, whatever the batch sizes: one for at most 8
rows, one for more. Not padded: a solve traced inside a transformation of the caller
(its program is recompiled for a new ``B`` anyway, and a pad there is work in the
caller's program), an explicit ``lanes >= B`` (every row in a lane: a padded row would
take its steps), and a batch sharded across devices (its sharding is the caller's). An
explicit ``lanes=``, a progress report (counted over the batch) or a weakly typed leaf
(NumPy would make it strong) keep the bucket.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._driver.lanes import block_rows
from fixedopt._inputs import arrays
from fixedopt._numerics import buckets
from fixedopt._numerics.trace_state import at_top_level
from fixedopt._results.solution import Solution

if TYPE_CHECKING:
    from fixedopt._driver.engine import Inputs, Plan

# The fields of Inputs whose every leaf has the batch axis (a batch pads them).
ROW_FIELDS = ("x0", "fixed", "fixed_values", "bounds", "sigma", "counts", "split_index")


def solve_rows(solve: Callable[[Inputs], Solution], plan: Plan, inputs: Inputs) -> Solution:
    """``solve(inputs)``, its rows given to it in the compiled size of the module's
    rules, the solution cut back to the batch's rows."""
    if plan.batched_args is None or not plan.differentiate.through_lanes:
        return solve(inputs)
    batch = jax.tree.leaves(inputs.x0)[0].shape[0]
    whole = batch == 0 or (plan.lanes is not None and plan.lanes >= batch)
    own, own_tree = jax.tree.flatten({name: getattr(inputs, name) for name in ROW_FIELDS})
    args, args_tree = jax.tree.flatten(inputs.args)
    leaves, flags = (*own, *args), (True,) * len(own) + tuple(plan.batched_args)
    if whole or not at_top_level() or not buckets.on_one_device(list(leaves)):
        return solve(inputs)

    def solve_block(block: tuple[Any, ...], count: int) -> Solution:
        grown = jax.tree.unflatten(own_tree, block[: len(own)])
        args_grown = jax.tree.unflatten(args_tree, block[len(own) :])
        count_leaf = arrays.asarray(count, jnp.int32)
        return solve(inputs._replace(**grown, args=args_grown, batch=count_leaf))

    size = None if batch <= buckets.SMALLEST else _block_size(plan, leaves, flags)
    if size is None:
        size = buckets.bucket(batch)
        padded = buckets.pad_rows(leaves, size, flags, plan.backend) if size > batch else leaves
        solution = solve_block(padded, batch)
        return solution if size == batch else buckets.first_rows(solution, batch, plan.backend)
    blocks: Solution = buckets.in_chunks(solve_block, leaves, flags, batch, size)
    return blocks


def _block_size(plan: Plan, leaves: tuple[Any, ...], flags: tuple[bool, ...]) -> int | None:
    """The CPU's block for this model (None: a bucket of the batch's size)."""
    if plan.backend != "cpu" or plan.lanes is not None or plan.progress is not None:
        return None
    if not buckets.chunks_here(leaves):
        return None
    row_bytes = sum(np.dtype(leaf.dtype).itemsize * int(np.prod(leaf.shape[1:]))
                    for leaf, flag in zip(leaves, flags) if flag)  # fmt: skip
    return block_rows(row_bytes)
