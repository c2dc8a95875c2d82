"""L-BFGS's memory: the state that holds the curvature pairs in a ring buffer, the
two-loop recursion that reads them as the inverse Hessian, the pairs restricted to a
free subspace, and the update that stores a new pair.

The pairs live in the free subspace: fixed entries are zero in every stored ``s`` and
``y``, and a pair without positive curvature is stored empty (``rho = 0``), so it drops
out of the recursion branch-free.

Shapes, for one row of ``n`` flat parameters and a memory of ``m`` pairs: the
histories are ``(m, n)``, ``rho`` ``(m,)``, ``grad``, ``s``, ``y`` and ``direction``
``(n,)``; scalars (``gamma``, ``pairs``, a ring slot) are ``()`` arrays.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from fixedopt._derivatives.ring import plain_read_slot, plain_write_slot, read_slot, write_slot
from fixedopt._numerics import reduce
from fixedopt._solvers.scaling import update_diagonal

# ``history, slot -> history[slot]`` and ``history, slot, value -> history`` with
# ``value`` at ``slot``: one slot of a ring buffer (``slot`` an ``()`` int array).
ReadSlot = Callable[[jax.Array, jax.Array], jax.Array]
WriteSlot = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]


class LBFGSState(NamedTuple):
    s_history: jax.Array  # (memory_size, n): ring buffer of steps, slot = iteration % m
    y_history: jax.Array  # (memory_size, n): the matching gradient changes
    rho: jax.Array  # (memory_size,): 1 / (s.y) per pair, 0 for an empty or skipped slot
    gamma: jax.Array  # scale of the initial inverse Hessian, s.y / y.y of the last pair
    pairs: jax.Array  # how many pairs have been stored (saturates at memory_size)
    direction: jax.Array  # (n,): the model's step -H grad at the current point
    diagonal: jax.Array  # (n,): the diagonal initial inverse Hessian (scaling.py)
    validated: jax.Array  # (): the model passed the test of the last measurable step


def two_loop(
    grad: jax.Array,
    s_history: jax.Array,
    y_history: jax.Array,
    rho: jax.Array,
    newest: ArrayLike,
    gamma: jax.Array,
    read: ReadSlot = plain_read_slot,
    write: WriteSlot = plain_write_slot,
) -> jax.Array:
    """``H @ grad`` for the L-BFGS inverse Hessian ``H`` (Nocedal 1980).

    ``grad``: ``(n,)``; ``s_history``, ``y_history``: ``(memory_size, n)``; ``rho``:
    ``(memory_size,)``; ``newest``: ``()``; ``gamma``: ``()`` or ``(n,)`` (a diagonal
    initial inverse Hessian). Returns ``(n,)``.

    The pairs sit in a ring buffer whose newest entry is at slot ``newest``; empty
    or skipped slots (and pairs whose curvature vanished once masked to the free
    subspace) have ``rho = 0`` and drop out, branch-free. In a batch ``newest`` is one
    unbatched scalar (every running row stores its pair at the same slot), and so is
    each loop's counter, so the history is read with plain slices, not per-row
    gathers: under ``vmap`` this streams it at memory bandwidth. ``read(history,
    slot)`` reads one slot and ``write(history, slot, value)`` writes one (the
    ``alpha`` of each pair): :func:`~fixedopt._derivatives.ring.read_slot` and
    ``write_slot`` keep them slices under ``vmap`` (the defaults, a ``dynamic_slice``
    and a ``dynamic_update_slice``, become a gather and a scatter there but can be
    differentiated in reverse mode).

    The two loops are ``fori_loop``s (scans), not unrolled: unrolled, the default
    memory of 10 pairs was 20 copies of the step's arithmetic in every L-BFGS program,
    0.2 to 1.3 s more compile on the CPU, and mostly slower to run (rolled: 0.79x the
    time at quad n = 8, B = 1e5; 1.10x at n = 64, B = 1024;
    ``docs/decisions.md``, "The two-loop recursion rolled").
    """
    memory = s_history.shape[0]
    newest = jnp.asarray(newest)
    period = jnp.asarray(memory, newest.dtype)

    def slot(j: jax.Array) -> jax.Array:  # the j-th newest pair's slot
        return jax.lax.rem(newest + (memory - j.astype(newest.dtype)), period)

    def newest_first(j: jax.Array, q_alphas: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
        q, alphas = q_alphas
        i = slot(j)
        alpha = read(rho, i) * reduce.dot(read(s_history, i), q)
        return q - alpha * read(y_history, i), write(alphas, j, alpha)

    def oldest_first(k: jax.Array, r: jax.Array) -> jax.Array:
        j = memory - 1 - k
        i = slot(j)
        correction = read(alphas, j) - read(rho, i) * reduce.dot(read(y_history, i), r)
        return r + correction * read(s_history, i)

    alphas = jnp.zeros((memory,), grad.dtype)
    q, alphas = jax.lax.fori_loop(0, memory, newest_first, (grad, alphas))
    r: jax.Array = jax.lax.fori_loop(0, memory, oldest_first, gamma * q)
    return r


# The recursion reading the ring buffer with ``read_slot`` (a slice under ``vmap``),
# batched by plain ``vmap`` on every backend. (A CPU variant ran it 16 rows at a time
# to keep each row's history in cache; by 2026-11-30 it made whole solves at n >= 256
# about 2x slower than this, so it is gone: docs/decisions.md, "The solvers suite against
# scipy and optax", against the chunked run committed in 24c1c06, the quad n=512 rows.)
two_loop_by_slots = functools.partial(two_loop, read=read_slot, write=write_slot)


def pairs_in(state: LBFGSState, free: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The curvature pairs restricted to the ``free`` entries (``(n,)`` bool), with their
    ``rho``; a pair whose curvature vanishes there drops out (``rho = 0``)."""
    s_history = jnp.where(free[None, :], state.s_history, 0.0)
    y_history = jnp.where(free[None, :], state.y_history, 0.0)
    sy = reduce.total(s_history * y_history)
    return s_history, y_history, _inverse_or_zero(sy, (sy > 0) & (state.rho > 0))


def _inverse_or_zero(value: jax.Array, positive: jax.Array) -> jax.Array:
    return jnp.where(positive, 1.0 / jnp.where(positive, value, 1.0), 0.0)


def remember(
    state: LBFGSState,
    s: jax.Array,
    y: jax.Array,
    accepted: jax.Array,
    slot: jax.Array,
    memory_size: int,
    from_hessian: bool,
    active: jax.Array | bool = True,
    read: ReadSlot = plain_read_slot,
    write: WriteSlot = plain_write_slot,
    held: jax.Array | None = None,
) -> LBFGSState:
    """Store the pair ``(s, y)`` in ``slot``; a pair without positive curvature
    is stored empty (``rho = 0``), so it drops out of the two-loop recursion. The
    curvature is tested without ``held`` (``(n,)`` bool, None: none), the entries held
    on a bound that the step did not move: their gradient changes by rounding alone,
    and counted, its size set ``y.y`` (a float32 row of the bounded units audit stored
    no pair in 993 steps at its minimum: docs/decisions.md, "Bounded L-BFGS verdicts
    in units 1e-6..1e6"). The pair is stored whole. An
    inactive row (``active`` False: stopped, or waiting for its check) writes its
    slot back as it was: the memory the check reads does not depend on how long
    the row waited (see :meth:`fixedopt.Solver.certify`).

    Writes one slot of the ring buffer rather than shifting the whole history.
    ``memory_size`` is the solver's (``LBFGS.memory_size``); ``from_hessian``
    (static): the diagonal started from the Hessian's at ``x0``
    (``LBFGS(scaling="hessian")``), so the first pair does not restart it from
    ``s.y / y.y``.
    """
    sy, yy = reduce.dot(s, y), reduce.dot(y, y)
    measured = y if held is None else jnp.where(held, 0.0, y)
    measured_yy = reduce.dot(measured, measured)
    eps = jnp.finfo(s.dtype).eps
    # Positive curvature, tested in two ways: ``gamma = s.y / y.y > eps`` depends on
    # the units of ``f`` (in float32 with ``f`` times 1e6 it drops every pair, and the
    # row runs on steepest descent), ``cos(s, y) > eps`` does not.
    cosine = sy > eps * jnp.sqrt(reduce.dot(s, s) * measured_yy)
    good = accepted & ((sy > eps * measured_yy) | cosine)
    first = (state.pairs == 0) & (not from_hessian)
    safe_s, safe_y = jnp.where(good, s, 1.0), jnp.where(good, y, 1.0)  # finite when unused
    diagonal = update_diagonal(state.diagonal, safe_s, safe_y, first)

    def store(history: jax.Array, value: jax.Array) -> jax.Array:
        return write(history, slot, jnp.where(active, value, read(history, slot)))

    return LBFGSState(
        s_history=store(state.s_history, jnp.where(good, s, 0.0)),
        y_history=store(state.y_history, jnp.where(good, y, 0.0)),
        rho=store(state.rho, _inverse_or_zero(sy, good)),
        gamma=jnp.where(good, sy / jnp.where(good, yy, 1.0), state.gamma),
        pairs=jnp.minimum(state.pairs + good, memory_size).astype(jnp.int32),
        direction=state.direction,
        diagonal=jnp.where(good, diagonal, state.diagonal),
        validated=state.validated,
    )
