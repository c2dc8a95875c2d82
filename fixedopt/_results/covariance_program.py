"""The covariance's compiled program: which inverse each row takes, in which order.

A row's inverse of ``J_F^T J_F`` comes from the first path that certifies it
(:func:`paths`): the normal equations where they pay
(:mod:`fixedopt._results.normal_inverse`), the elementwise QR for a small block
(:mod:`fixedopt._results.small_inverse`), LAPACK's QR and SVD always
(:mod:`fixedopt._results.row_covariance`). :data:`compiled` computes each row's
covariance by the path a call names: one path with its rows' certificates (the rows
it does not certify computed again by the next: ``fixedopt._results.covariance_batches``),
each row's first certified one (:data:`EITHER`), or the quick paths alone, the QR at
any height (:data:`ON_DEVICE`: a device whose SVD and QR compile for seconds).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._inputs.validate import PyTree
from fixedopt._numerics import cpu_compiler
from fixedopt._results import normal_inverse, small_inverse
from fixedopt._results.covariance_fields import Covariance
from fixedopt._results.free_block import Constraints, ResidualFun
from fixedopt._results.row_covariance import (
    Inverse,
    Pieces,
    Rule,
    exact_inverse,
    finished,
    pieces,
    quick_inverse,
    select,
)

# ``(x, args) -> anything``: of one row, computed beside its covariance (covariance_and).
Derived = Callable[[PyTree, tuple[Any, ...]], PyTree]

# The inverses a program takes: from the normal equations, by the elementwise QR (each
# with its rows' certificates), LAPACK's (exact), or each row's first certified one;
# on a device, each row's first certified by the quick paths, the QR for any height.
NORMAL, QUICK, EXACT, EITHER = "normal", "quick", "exact", "either"
ON_DEVICE = "on-device"


def row_size(x: PyTree, batched: bool) -> int:
    """The number of entries of one row of ``x``."""
    return sum(int(np.prod(jnp.shape(leaf)[1 if batched else 0 :])) for leaf in jax.tree.leaves(x))


def paths(x: PyTree, batched: bool) -> tuple[str, ...]:
    """The inverses a row of ``x`` may take, in order: the normal equations where they
    pay (:func:`fixedopt._results.normal_inverse.pays`), the QR for a small block, and
    LAPACK's always (a program's own shapes may send a path on to the next:
    :func:`_inverse`)."""
    n = row_size(x, batched)
    dtype = jnp.result_type(*jax.tree.leaves(x)) if jax.tree.leaves(x) else jnp.float32
    small = (QUICK,) if small_inverse.is_small(n) else ()
    normal = (NORMAL,) if normal_inverse.pays(dtype, n) else ()
    return normal + small + (EXACT,)


def _row_covariances(
    residual_fun: ResidualFun,
    batched: bool,
    rule: Rule,
    axes: PyTree,
    derived: Derived | None,
    path: str,
    x: PyTree,
    constraints: Constraints,
    sigma: jax.Array | None,
    args: tuple[Any, ...],
) -> tuple[Covariance, jax.Array | None, PyTree]:
    """The covariance of one row (of each row, ``batched``), ``index`` left None, by
    the inverse ``path`` names (:func:`_inverse`); the rows' certificates (None for
    :data:`EXACT`); and ``derived`` of each row (on every path: a row computed again by
    a later path has it computed twice, and dropped). ``axes`` are the ``vmap`` axes of
    ``args``."""
    with_derived = derived is not None

    def one(
        x: PyTree, constraints: Constraints, sigma: jax.Array | None, args: PyTree
    ) -> tuple[Pieces, PyTree]:
        found = pieces(residual_fun, rule, x, constraints, sigma, args)
        return found, (derived(x, args) if with_derived and derived is not None else None)

    def over_rows(f: Callable[..., Any]) -> Callable[..., Any]:
        return jax.vmap(f) if batched else f

    if batched:
        sigma_axis = None if sigma is None else 0
        found, extra = jax.vmap(one, in_axes=(0, 0, sigma_axis, axes))(x, constraints, sigma, args)
    else:
        found, extra = one(x, constraints, sigma, args)
    every = paths(x, batched)
    if path == ON_DEVICE:
        chain = tuple(p for p in every if p != EXACT)
    else:
        chain = every if path == EITHER else every[every.index(path) :]
    inverse, certified = _inverse(rule, over_rows, found, chain, path in (EITHER, ON_DEVICE),
                                  path == ON_DEVICE)  # fmt: skip
    covariances = over_rows(functools.partial(finished, rule))(x, constraints, found, inverse)
    return covariances, (None if path == EXACT else certified), extra


def _inverse(
    rule: Rule,
    over_rows: Callable[..., Any],
    found: Pieces,
    chain: tuple[str, ...],
    on: bool,
    device: bool = False,
) -> tuple[Inverse, jax.Array]:
    """The rows' inverses by ``chain[0]`` and their certificates; with ``on``, the rows
    it does not certify by the rest of the chain (a ``cond`` on the batch, each row then
    picking its own: a vmapped ``cond`` would run both). A path whose shapes do not pay
    (the QR of a tall block) hands its rows on; the last (LAPACK's) certifies all.
    ``device``: a chain of quick paths alone, the QR at any height, the certificates
    any of them gave (:data:`ON_DEVICE`)."""
    path, rest = chain[0], chain[1:]
    if path == QUICK and not device and not small_inverse.pays(*found.jacobian.shape[-2:]):
        path, rest = rest[0], rest[1:]  # a tall block: LAPACK's, certified alike
    if path == EXACT:
        inverse: Inverse = over_rows(functools.partial(exact_inverse, rule.pseudo_inverse))(found)
        return inverse, jnp.ones(found.n_free.shape, bool)
    quick, certified = over_rows(functools.partial(quick_inverse, normal=path == NORMAL))(found)
    if not on or not rest:
        return quick, certified
    if device:

        def next_ones() -> tuple[Inverse, jax.Array]:
            inverse, more = _inverse(rule, over_rows, found, rest, True, True)
            return select(certified, quick, inverse), certified | more

        both: tuple[Inverse, jax.Array] = jax.lax.cond(
            jnp.all(certified), lambda: (quick, certified), next_ones
        )
        return both
    later = lambda: select(certified, quick, _inverse(rule, over_rows, found, rest, True)[0])
    chosen: Inverse = jax.lax.cond(jnp.all(certified), lambda: quick, later)
    return chosen, certified


# Compiled with XLA:CPU's elemental emitter at the top level, its reductions the same for
# every batch size, each fusion on one thread
# (fixedopt._numerics.cpu_compiler.SERIAL_ROW_WISE_OPTIONS). Called as
# ``compiled(residual_fun, batched, rule, axes, derived, path, x, constraints, sigma,
# args)``: ``(covariance, certificates, derived)``.
compiled = cpu_compiler.jit_for_cpu(
    _row_covariances, (0, 1, 2, 3, 4, 5), cpu_compiler.SERIAL_ROW_WISE_OPTIONS
)
