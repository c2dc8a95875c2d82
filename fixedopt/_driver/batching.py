"""A batch through lanes called at the top level: run as rows of one compiled size.

A compiled program is specialised to its arrays' shapes, so each new batch size would
compile the whole solve again (seconds), although the lanes' loop body does not depend
on the batch size ``B`` (:mod:`fixedopt._driver.lanes`). So the rows are given to the
compiled solve in a size that ``B`` does not set, padded with copies of row 0, the true
count travelling as data (the lanes never take a padded row; :mod:`fixedopt._numerics.buckets`):

- **a batch of at most 8 rows, padded to 8**: its rows all in lanes from the start (one
  ``vmap``), the padded ones take their steps (copies of row 0, as many as it takes);
- **on the CPU, blocks of one size per model** (:func:`fixedopt._driver.machine.block_rows`,
  from the bytes of a row's data): every batch of more than 8 rows runs through the
  same program, a batch larger than a block as several calls of it, their rows joined
  on the host (whose memory is the device's). The block holds at least 8 rows for each
  of the default lanes, so the lanes are as wide as for a batch of any size, and a
  block's last, slow rows overlap with others as in one long queue (measured: 4 blocks
  of the Gaussian spot, 8 of quad n = 64, the same time as one batch of their rows);
  and a block's **tail** is cut short: when its queue has ended and its last rows (at
  most ``Backend.tail_lanes``) have run alone for ``tail_patience`` trips
  (:mod:`fixedopt._driver.machine`), the block stops and those rows are solved again
  from their starts, ``tail_lanes`` rows
  wide (every trip of the block's lanes costs all of them: 0.40 ms for 64 lanes of the
  spectra fit, where the lone row's step costs 24-37 us), a program compiled in a
  thread while a model's first block compiles and runs (:mod:`fixedopt._driver.ahead`),
  not inside the call that first has a tail;
- **elsewhere, the next power of two** (:func:`fixedopt._numerics.buckets.bucket`): an
  accelerator's lanes grow with the batch (its trips cost about the same whatever
  their width), so a batch is one call, compiled once for each bucket.

So a model compiles two solves on the CPU, whatever the batch sizes: one for at most 8
rows, one for more, and a third, its tail's, compiled ahead beside the second. Not padded: a solve
traced inside a transformation of the caller (its program is recompiled for a new
``B`` anyway, and a pad there is work in the caller's program), an explicit
``lanes >= B`` (every row in a lane: a padded row would take its steps), and a batch
sharded across devices (its sharding is the caller's). An explicit ``lanes=``, a
progress report (counted over the batch) or a weakly typed leaf (NumPy would make it
strong) keep the bucket.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._contract.status import busy
from fixedopt._driver import ahead
from fixedopt._driver.machine import Schedule, block_rows
from fixedopt._driver.plan import Inputs, Plan
from fixedopt._inputs import arrays
from fixedopt._numerics import buckets
from fixedopt._numerics.trace_state import at_top_level
from fixedopt._results.solution import Solution

# The fields of Inputs whose every leaf has the batch axis (a batch pads them).
ROW_FIELDS = ("x0", "fixed", "fixed_values", "bounds", "sigma", "counts", "split_index",
              "resume")  # fmt: skip


Compiled = Callable[[Plan, Schedule, Inputs], Solution]  # a jit function of the solve


def solve_rows(
    compiled_for: Callable[[Schedule], Compiled],
    plan: Plan,
    schedule: Schedule,
    inputs: Inputs,
) -> Solution:
    """``compiled(plan, schedule, inputs)``, its rows given to it in the compiled size
    of the module's rules, the solution cut back to the batch's rows; ``compiled_for``:
    the jit function that compiles a schedule (with its XLA options: a block's tail has
    its own, :meth:`fixedopt._driver.machine.Schedule.of_tail`)."""
    compiled = compiled_for(schedule)

    def solve(inputs: Inputs) -> Solution:
        return compiled(plan, schedule, inputs)

    def asarray(count: int) -> jax.Array:
        return arrays.asarray(count, jnp.int32)

    if plan.batched_args is None or not plan.differentiate.through_lanes:
        return solve(inputs)
    batch = jax.tree.leaves(inputs.x0)[0].shape[0]
    whole = batch == 0 or (plan.lanes is not None and plan.lanes >= batch)
    own, own_tree = jax.tree.flatten({name: getattr(inputs, name) for name in ROW_FIELDS})
    args, args_tree = jax.tree.flatten(inputs.args)
    leaves, flags = (*own, *args), (True,) * len(own) + tuple(plan.batched_args)
    if whole or not at_top_level() or not buckets.on_one_device(list(leaves)):
        return solve(inputs)

    def block_inputs(block: tuple[Any, ...], count: jax.Array | None) -> Inputs:
        grown = jax.tree.unflatten(own_tree, block[: len(own)])
        args_grown = jax.tree.unflatten(args_tree, block[len(own) :])
        return inputs._replace(**grown, args=args_grown, batch=count)

    size = None if batch <= buckets.SMALLEST else _block_size(plan, schedule, leaves, flags)
    if size is None:
        bucket = buckets.bucket(batch)
        host = schedule.defaults.rows_on_host
        padded = _padded(leaves, bucket, flags, host) if bucket > batch else leaves
        solution = solve(block_inputs(padded, asarray(batch)))
        return solution if bucket == batch else buckets.first_rows(solution, batch, host)
    return _in_blocks(compiled_for, plan, schedule, (leaves, flags), block_inputs, size)


def _padded(
    leaves: tuple[Any, ...], size: int, flags: tuple[bool, ...], host: bool
) -> tuple[Any, ...]:
    """The batch's rows padded to ``size`` (:func:`fixedopt._numerics.buckets.pad_rows`,
    in NumPy where ``host``). On an accelerator, rows mostly on the host
    (``buckets.mostly_on_host``: a caller's NumPy data) are padded in NumPy while the
    small program that pads them compiles in fixedopt's thread (:func:`ahead.soon`),
    and by that program once it is compiled: a TPU compiled Gpufit's spot's for 1.3 s
    inside its first call, and NumPy's copy cost that spot's compiled call 4.5 ms of
    52 (``docs/decisions.md``, "The pad program of a TPU's first call")."""
    flagged = [leaf for leaf, flag in zip(leaves, flags) if flag]
    if host or not ahead.enabled[0] or not buckets.mostly_on_host(flagged):
        return buckets.pad_rows(leaves, size, flags, host)
    types = tuple((np.shape(leaf), jnp.result_type(leaf), getattr(leaf, "weak_type", False),
                   isinstance(leaf, jax.Array)) for leaf in leaves)  # fmt: skip
    key = ("pad", size, flags, types)
    if ahead.ready(key):
        return buckets.pad_rows(leaves, size, flags, False)
    ahead.soon(key, functools.partial(buckets.lowered_pad, leaves, size, flags))
    return buckets.pad_rows(leaves, size, flags, True)


def rows_for(plan: Plan, schedule: Schedule, inputs: Inputs, count: int) -> int:
    """How many rows a batch of ``count`` of ``inputs``' rows must have to run through the
    program that :func:`solve_rows` runs for all of them (``fixedopt._driver.after_loop``
    fills the others with rows that take no step): a CPU block's program takes any
    batch of more than 8 rows; every other program is ``inputs``' size."""
    batch = int(jax.tree.leaves(inputs.x0)[0].shape[0])
    if plan.batched_args is None or batch <= buckets.SMALLEST or plan.lanes is not None:
        return batch
    own = [leaf for name in ROW_FIELDS for leaf in jax.tree.leaves(getattr(inputs, name))]
    args = jax.tree.leaves(inputs.args)
    leaves, flags = (*own, *args), (True,) * len(own) + tuple(plan.batched_args)
    if not buckets.on_one_device(list(leaves)):
        return batch
    blocks = _block_size(plan, schedule, leaves, flags) is not None
    return max(count, buckets.SMALLEST + 1) if blocks else batch


def _in_blocks(
    compiled_for: Callable[[Schedule], Compiled],
    plan: Plan,
    schedule: Schedule,
    batched: tuple[tuple[Any, ...], tuple[bool, ...]],
    block_inputs: Callable[[tuple[Any, ...], jax.Array | None], Inputs],
    size: int,
) -> Solution:
    """The batch's rows (``batched``: every leaf, and whether it has the batch axis) in
    blocks of ``size`` rows, each block's tail solved again (the module's rules)."""
    leaves, flags = batched
    batch = next(leaf for leaf, flag in zip(leaves, flags) if flag).shape[0]
    tail_lanes = schedule.defaults.tail_lanes
    block_schedule, tail_schedule = schedule._replace(tail=True), schedule.of_tail()
    compiled, tail_compiled = compiled_for(block_schedule), compiled_for(tail_schedule)

    def tail_inputs(block: tuple[Any, ...], rows: np.ndarray) -> Inputs:
        """The tail's inputs: ``rows`` of ``block``, as tail_lanes rows (a copy of the
        first where fewer)."""
        taken = np.resize(rows, tail_lanes)
        tail = tuple(np.asarray(leaf)[taken] if flag else leaf
                     for leaf, flag in zip(block, flags))  # fmt: skip
        return block_inputs(tail, None)

    def solve_block(block: tuple[Any, ...], count: int) -> Solution:
        inputs = block_inputs(block, arrays.asarray(count, jnp.int32))
        # The tail's program compiles in a thread while the block's does (the first
        # time), once the block's is traced and lowered (fixedopt._driver.ahead); not
        # where no row runs tail_patience steps (Gpufit's protocol: 10), with no tail.
        if int(np.asarray(inputs.stopping.max_steps)) >= schedule.defaults.tail_patience:
            traced = functools.partial(compiled.lower, plan, block_schedule, inputs)  # type: ignore[attr-defined]
            tail_inputs_ahead = tail_inputs(block, np.arange(tail_lanes))
            ahead.start(traced, tail_compiled, plan, tail_schedule, tail_inputs_ahead, export=True)
        solution = compiled(plan, block_schedule, inputs)
        status = np.asarray(solution.status)[:count]
        rows = np.flatnonzero(busy(status))  # the tail, left RUNNING or PENDING (not CLAIMED)
        if rows.size == 0:
            return solution
        # The block's slow last rows (at most tail_lanes): solved again on their own
        # and put in their places.
        tail = tail_inputs(block, rows)
        alone = ahead.call(tail_compiled, plan, tail_schedule, tail, like=solution)
        put: Solution = jax.tree.map(lambda a, b: _put_rows(a, b, rows), solution, alone)
        return put

    blocks: Solution = buckets.in_chunks(solve_block, leaves, flags, batch, size)
    return blocks


def _put_rows(whole: Any, part: Any, rows: np.ndarray) -> np.ndarray:
    """``whole`` (a leaf of a block's solution) with ``part``'s first rows at ``rows``,
    on the host."""
    out = np.array(whole)
    out[rows] = np.asarray(part)[: rows.size]
    return out


def _block_size(
    plan: Plan, schedule: Schedule, leaves: tuple[Any, ...], flags: tuple[bool, ...]
) -> int | None:
    """The CPU's block for this model (None: a bucket of the batch's size)."""
    if not schedule.defaults.blocks or schedule.lanes is not None or plan.progress is not None:
        return None
    if not buckets.chunks_here(leaves):
        return None
    row_bytes = sum(np.dtype(leaf.dtype).itemsize * int(np.prod(leaf.shape[1:]))
                    for leaf, flag in zip(leaves, flags) if flag)  # fmt: skip
    return block_rows(row_bytes)
