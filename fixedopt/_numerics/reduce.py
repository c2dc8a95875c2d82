"""Reductions along the last axis, folded to at most ``fold`` entries first (the machine
profile's ``Kernels.fold``: 32 on the CPU).

XLA:CPU (jaxlib 0.10) gives a reduction to its YNN library when the array is large
(about 4096 entries in all); a smaller one whose reduced axis is longer than 32 is
rewritten into a padded ``reduce-window`` and a ``reduce`` (XLA's tree-reduction
rewrite): three kernels where one would do. In the lanes' loop (``fixedopt._driver``)
that is every reduction of a row of 33 to a few hundred entries, because the lanes'
width keeps ``W x n`` near the cache's size. Measured on L-BFGS, ``quad`` n = 64,
B = 1024, default lanes (W = 33): 100 of the program's 339 kernels, and 1.43x the
time of the whole solve (with the rewrite switched off by XLA's
``--xla_disable_hlo_passes=tree_reduction_rewriter``: 150 ms against 215 ms).

Here a vector of more than ``fold`` entries is first folded to ``fold``: its
``fold``-wide chunks are combined elementwise (the last one padded with the
reduction's identity), which XLA fuses into the one kernel of the reduction that
follows. The same summands, added as a tree reduction adds them (32 partial sums,
then their sum): the rounding is of the same kind, not the same bits. Up to ``fold``
entries nothing changes (the plain ``jnp`` reduction); above ``fold_chunks * fold``
neither: at the fewest lanes (8) such rows fill arrays that YNN takes, and folding
n = 512 cost 0.35 s of compile for 1.16x. Measured (``docs/decisions.md``, "Row reductions
folded to 32 entries"): 1.28x-1.35x at n = 64, 1.41x at 128, 1.48x at 256, the same
program at n = 16 and 512. Residuals (a least-squares row's ``m`` entries) are reduced
plainly: those rows are short in ``n``, so their lanes are wide and ``W x m`` reaches
YNN (the decay fit, m = 128: folded, 1.09x for 0.2 s more compile).

Folding is a trace-time switch, off unless a program is traced inside
``folding(True)``: the lanes (``fixedopt._driver.lanes``) turn it on where it pays, on
the CPU (its machine profile, ``fixedopt._driver.machine``, which holds these numbers
and gives ``fold`` and ``fold_chunks`` to the trace: ``fixedopt._numerics.kernels``)
when ``W x n`` stays below the entries YNN takes (``Backend.ynn_entries``). Where
YNN takes the plain reduction it is the faster one (the whole batch of quad n = 64,
B = 1024, as one ``vmap``: 475 ms plain against 612 ms folded), and no other backend
runs this CPU trick.

Many sums over one axis can be made one reduction (:func:`together`, XLA's variadic
reduce): a least-squares step's ``J^T J``, ``J^T r`` and ``|r|^2`` are, on the CPU
(``fixedopt._solvers.small_linalg.normal_sums``; the machine profile's
``Kernels.summed_n``).

Every function reduces the last axis of its argument (one row's vector, or a batch of
them; :func:`together` takes ``(m,)`` terms).

Example:
  >>> import jax.numpy as jnp
  >>> from fixedopt._numerics import kernels, reduce
  >>> v = jnp.arange(100.0)
  >>> with kernels.using(kernels.Kernels(fold=32, fold_chunks=8)), reduce.folding(True):
  ...     float(reduce.total(v)), float(reduce.dot(v, v)), float(reduce.largest(-v))
  (4950.0, 328350.0, -0.0)
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from fixedopt._numerics import kernels

_FOLDING = contextvars.ContextVar("fixedopt_folding", default=False)


@contextlib.contextmanager
def folding(on: bool) -> Iterator[None]:
    """Fold the reductions traced inside (``on``), or not."""
    token = _FOLDING.set(on)
    try:
        yield
    finally:
        _FOLDING.reset(token)


@jax.custom_jvp
def together(terms: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
    """The sum of each ``(m,)`` array of ``terms``, as ONE reduction per dtype (XLA's
    variadic reduce, which takes one precision): one kernel that computes the terms
    where it reads their inputs and writes only the sums, where sums one by one would
    read terms that XLA writes out first.

    Example:
      >>> import jax.numpy as jnp
      >>> from fixedopt._numerics import reduce
      >>> a = jnp.arange(4.0)
      >>> [float(s) for s in reduce.together((a, a * a))]
      [6.0, 14.0]
    """
    groups: dict[jnp.dtype, list[int]] = {}
    for index, term in enumerate(terms):
        groups.setdefault(jnp.dtype(term.dtype), []).append(index)
    summed: list[jax.Array] = list(terms)
    for dtype, indices in groups.items():
        zeros = tuple(jnp.zeros((), dtype) for _ in indices)
        sums = jax.lax.reduce(
            tuple(terms[i] for i in indices),
            zeros,
            lambda a, b: tuple(x + y for x, y in zip(a, b)),
            (0,),
        )
        for i, total in zip(indices, sums):
            summed[i] = total
    return tuple(summed)


@together.defjvp
def _together_jvp(
    primals: tuple[tuple[jax.Array, ...]], tangents: tuple[tuple[jax.Array, ...]]
) -> tuple[tuple[jax.Array, ...], tuple[jax.Array, ...]]:
    """Sums are linear: the tangents are summed one by one (reductions that JAX can
    transpose, as it cannot a variadic one)."""
    (terms,), (dterms,) = primals, tangents
    return together(terms), tuple(jnp.sum(d) for d in dterms)


def folds(a: jax.Array) -> bool:
    """Whether the last axis of ``a`` is folded before it is reduced (static): inside
    ``folding(True)``, longer than the trace's ``Kernels.fold`` and at most its
    ``fold_chunks`` chunks."""
    tuned = kernels.current()
    return _FOLDING.get() and tuned.fold < a.shape[-1] <= tuned.fold_chunks * tuned.fold


def _fold(
    a: jax.Array, identity: ArrayLike, combine: Callable[[jax.Array, jax.Array], jax.Array]
) -> jax.Array:
    """``a`` with its last axis folded to ``Kernels.fold`` entries by ``combine``."""
    fold = kernels.current().fold
    chunks = -(-a.shape[-1] // fold)
    padding = [(0, 0)] * (a.ndim - 1) + [(0, chunks * fold - a.shape[-1])]
    a = jnp.pad(a, padding, constant_values=identity)
    folded = a[..., :fold]
    for k in range(1, chunks):
        folded = combine(folded, a[..., k * fold : (k + 1) * fold])
    return folded


def total(a: jax.Array, dtype: jnp.dtype | None = None) -> jax.Array:
    """``jnp.sum(a, axis=-1, dtype=dtype)``."""
    a = jnp.asarray(a)
    return jnp.sum(_fold(a, 0, jnp.add) if folds(a) else a, axis=-1, dtype=dtype)


def dot(a: jax.Array, b: jax.Array) -> jax.Array:
    """``jnp.dot(a, b)`` of two vectors (or ``sum(a * b, axis=-1)`` of batches)."""
    a, b = jnp.asarray(a), jnp.asarray(b)
    if a.ndim == b.ndim == 1 and not folds(a):
        return jnp.dot(a, b)
    return total(a * b)


def norm(a: jax.Array) -> jax.Array:
    """``jnp.linalg.norm(a)`` of a real vector (the 2-norm)."""
    a = jnp.asarray(a)
    return jnp.linalg.norm(a) if not folds(a) else jnp.sqrt(total(a * a))


def power_of_two(size: jax.Array) -> jax.Array:
    """The power of two ``2^e`` with ``size / 2^e`` in ``[0.5, 1)``, for a positive,
    finite ``size`` (else 1): a unit to divide by exactly, so that a sum of squares
    neither underflows nor overflows and, where it would not have, is the same to the
    bit, times ``4^-e``.

    Example:
      >>> import jax.numpy as jnp
      >>> from fixedopt._numerics import reduce
      >>> reduce.power_of_two(jnp.array([3.0, 0.0, 1e-20])).tolist()
      [4.0, 1.0, 1.3552527156068805e-20]
    """
    size = jax.lax.stop_gradient(size)  # a unit: piecewise constant, its derivative 0
    usable = jnp.isfinite(size) & (size > 0)
    if size.dtype == jnp.bfloat16:  # its subnormals compare otherwise in a fusion
        _, exponent = jnp.frexp(size)
        return jnp.where(usable, jnp.ldexp(jnp.ones_like(size), exponent), 1.0).astype(size.dtype)
    return jnp.where(usable, 2 * _power_below(size), 1.0).astype(size.dtype)


def _power_below(size: jax.Array) -> jax.Array:
    """The largest power of two at most ``size`` (positive, finite): its exponent bits
    (a subnormal's lifted into the normal range first, exactly). The bits of
    ``ldexp(1, frexp(size)[1] - 1)`` without ``ldexp``'s ``pow``, a kernel of its own in
    a Levenberg–Marquardt step."""
    info = jnp.finfo(size.dtype)
    bits = jnp.dtype(f"uint{info.bits}")
    lift = float(2.0 ** (info.nmant + 1))  # exact: a subnormal times it is normal
    small = size < info.tiny
    exponent = jax.lax.bitcast_convert_type(jnp.asarray(jnp.inf, size.dtype), bits)
    lifted = jax.lax.bitcast_convert_type(jnp.where(small, size * lift, size), bits)
    power = jax.lax.bitcast_convert_type(lifted & exponent, size.dtype)
    return jnp.where(small, power / lift, power)


def scaled_norm(a: jax.Array) -> jax.Array:
    """The 2-norm of a real vector ``a``, computed from ``a`` divided by the power of two
    of its largest entry (:func:`power_of_two`): no underflow where ``|a|^2`` would
    (a residual of 1e-20 in float32), nor overflow."""
    a = jnp.asarray(a)
    unit = power_of_two(largest(jnp.abs(a), initial=0.0))
    return unit * norm(a / unit)


def largest(a: jax.Array, initial: ArrayLike | None = None) -> jax.Array:
    """``jnp.max(a, axis=-1, initial=initial)``; NaN wins, as there."""
    a = jnp.asarray(a)
    if folds(a):
        a = _fold(a, _extreme(a.dtype, high=False), jnp.maximum)
    return jnp.max(a, axis=-1, initial=initial)


def smallest(a: jax.Array, initial: ArrayLike | None = None) -> jax.Array:
    """``jnp.min(a, axis=-1, initial=initial)``; NaN wins, as there."""
    a = jnp.asarray(a)
    if folds(a):
        a = _fold(a, _extreme(a.dtype, high=True), jnp.minimum)
    return jnp.min(a, axis=-1, initial=initial)


def any_true(a: jax.Array) -> jax.Array:
    """``jnp.any(a, axis=-1)``."""
    a = jnp.asarray(a, bool)
    return jnp.any(_fold(a, False, jnp.logical_or) if folds(a) else a, axis=-1)


def all_true(a: jax.Array) -> jax.Array:
    """``jnp.all(a, axis=-1)``."""
    a = jnp.asarray(a, bool)
    return jnp.all(_fold(a, True, jnp.logical_and) if folds(a) else a, axis=-1)


def _extreme(dtype: jnp.dtype, high: bool) -> ArrayLike:
    """The identity of ``min`` (``high``) or ``max`` for ``dtype``: ``inf`` or
    ``-inf``, or the largest or least integer."""
    if jnp.issubdtype(dtype, jnp.floating):
        return jnp.inf if high else -jnp.inf
    info = jnp.iinfo(dtype)
    return info.max if high else info.min
