"""Index splitting: pack each row's free entries into a short dense vector.

The comparison strategy to masking (``strategy="split"``): the solver works on
``z``, the free entries of a row padded to a common width, and the objective
scatters ``z`` back into the full vector. It is a transformation of one row's flat
:class:`~fixedopt._contract.solver.Problem`, so every solver runs on it unchanged. Widths
are powers of two (capped at ``n``), so masks with different free counts share a
compiled program unless they cross a power of two.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._contract.solver import Problem, ResidualAndJacobian
from fixedopt._inputs.validate import Mask, concrete_or_none


def packed_width(free_counts: np.ndarray, n: int) -> int:
    """The smallest power of two holding every row's free entries, at most ``n``."""
    largest = max(int(np.max(free_counts, initial=0)), 1)
    return min(1 << (largest - 1).bit_length(), n)


def free_indices(fixed: np.ndarray) -> np.ndarray:
    """Per row (last axis), the positions of its free entries, padded with ``n``.

    ``fixed`` is a concrete boolean array ``(..., n)``; returns ``(..., width)``.
    """
    n = fixed.shape[-1]
    width = packed_width(np.sum(~fixed, axis=-1), n)
    order = np.argsort(fixed, axis=-1, kind="stable")[..., :width]  # free first
    is_free = np.take_along_axis(~fixed, order, axis=-1)
    return np.where(is_free, order, n).astype(np.int32)


def split_indices(mask: Mask, batched: bool) -> jax.Array:
    """Per row, the free positions of the flat vector, padded (``strategy="split"``).

    ``mask`` is the normalized mask tree; it must be concrete (the packed width is
    chosen from it).
    """
    leaves = [concrete_or_none(leaf) for leaf in jax.tree.leaves(mask)]
    concrete = [leaf for leaf in leaves if leaf is not None]
    if len(concrete) < len(leaves):
        raise ValueError(
            '`fixed` must be concrete for strategy="split" (the packed width is chosen '
            'from it), got a traced mask; call outside jit or use strategy="mask"'
        )
    # An explicit row width: ``reshape(0, -1)`` is ambiguous for an empty batch.
    rows = [
        leaf.reshape((leaf.shape[0], math.prod(leaf.shape[1:])) if batched else (1, leaf.size))
        for leaf in concrete
    ]
    index = free_indices(np.concatenate(rows, axis=1))
    return jnp.asarray(index if batched else index[0])


def _with_padding(vector: jax.Array, fill: float) -> jax.Array:
    return jnp.concatenate([vector, jnp.full((1,), fill, vector.dtype)])


def pack(vector: jax.Array, index: jax.Array) -> jax.Array:
    """The entries of ``vector`` at ``index``; padding slots (``index == n``) read 0."""
    return _with_padding(vector, 0)[index]


def expand(z: jax.Array, base: jax.Array, index: jax.Array) -> jax.Array:
    """``base`` with the packed ``z`` written at ``index`` (padding slots dropped):
    entries not in ``index`` are ``base``'s, bit for bit."""
    return _with_padding(base, 0).at[index].set(z)[: base.shape[0]]


def split(problem: Problem, index: jax.Array) -> Problem:
    """The problem in the packed variables ``z`` (``x = expand(z, fixed_values, index)``).

    Padding slots (``index == n``) are fixed at 0 in the packed problem. Fixed entries
    of the expanded ``x`` are the fixed values bit for bit.
    """
    n = problem.fixed.shape[0]

    def value_and_grad(z: jax.Array) -> tuple[jax.Array, jax.Array]:
        value, grad = problem.value_and_grad(expand(z, problem.fixed_values, index))
        return value, pack(grad, index)

    residual_and_jacobian: ResidualAndJacobian | None = None
    full_residual_and_jacobian = problem.residual_and_jacobian
    if full_residual_and_jacobian is not None:

        def packed_residual_and_jacobian(z: jax.Array) -> tuple[jax.Array, jax.Array]:
            residual, jacobian = full_residual_and_jacobian(expand(z, problem.fixed_values, index))
            padded = jnp.concatenate([jacobian, jnp.zeros_like(jacobian[:, :1])], axis=1)
            return residual, padded[:, index]

        residual_and_jacobian = packed_residual_and_jacobian

    bounds = {}
    if problem.lower is not None and problem.upper is not None:
        bounds = {
            "lower": _with_padding(problem.lower, -jnp.inf)[index],
            "upper": _with_padding(problem.upper, jnp.inf)[index],
        }
    return Problem(
        value_and_grad=value_and_grad,
        fixed=index == n,
        fixed_values=jnp.zeros(index.shape, problem.fixed_values.dtype),
        residual_and_jacobian=residual_and_jacobian,
        differentiate=problem.differentiate,
        robust=problem.robust,
        hessian_products=problem.hessian_products,
        likelihood=problem.likelihood,
        lower=bounds.get("lower"),
        upper=bounds.get("upper"),
    )
