"""The :class:`fixedopt.Covariance` that :func:`fixedopt.covariance` returns (its own
module: :mod:`fixedopt._results.row_covariance` builds it, and
:mod:`fixedopt._results.covariance` calls that)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from fixedopt._inputs.validate import Mask, PyTree


class Covariance(NamedTuple):
    """What :func:`fixedopt.covariance` returns; a pytree (works under ``jit``).

    With ``batched=True`` every field but ``index`` has the leading batch axis.

    Attributes:
      covariance: ``(n, n)``, over the flat parameter vector ``ravel_pytree(x)``
        (leaves in ``jax.tree.leaves`` order, each raveled in C order): entry
        ``[index[a], index[b]]`` couples parameters ``a`` and ``b``. Rows and columns
        of fixed parameters (and, with ``at_bound="fixed"``, bound-active ones) are
        exactly 0.
      stderr: the standard errors, a tree like ``x``; 0 where ``covariance``'s
        diagonal is (fixed parameters), ``inf`` for a free parameter the data cannot
        determine (a rank-deficient row), NaN on the free block of a row whose
        residuals are not finite at ``x``, and of a :class:`fixedopt.Solution`'s row
        whose solve failed (status ``NONFINITE`` or ``INFEASIBLE``).
      rank_deficient: ``J_F`` has numerical rank below the number of free
        parameters (its covariance does not exist): the row's free block is the
        pseudo-inverse, ``inf`` for the parameters the data cannot determine (see
        ``pseudo_inverse``).
      dof: degrees of freedom ``m - n_free`` (``n_free`` counts the parameters in
        ``F``: neither fixed nor, with ``at_bound="fixed"``, bound-active ones; ``m``
        the residuals, less those of infinite ``sigma``, which weigh 0).
        With ``dof <= 0`` and ``absolute_sigma=False`` the free block is ``inf``,
        as in ``curve_fit``.
      residual_variance: ``s^2``, the factor applied to ``(J_F^T J_F)^{-1}`` (1 with
        ``absolute_sigma=True``).
      fixed: the fixed mask, a tree of booleans like ``x``.
      at_bound: the bound-active free entries (on a bound that the gradient pushes
        against), flagged with either ``at_bound`` option (with ``"fixed"``, held like
        fixed ones).
      index: a tree like one row of ``x`` (no batch axis) of ``int32`` positions in
        the flat vector.
    """

    covariance: jax.Array
    stderr: PyTree
    rank_deficient: jax.Array
    dof: jax.Array
    residual_variance: jax.Array
    fixed: Mask
    at_bound: PyTree
    index: PyTree

    def correlation(self) -> jax.Array:
        """``covariance / outer(stderr, stderr)``; 0 where a standard error is 0."""
        flat = jax.vmap(lambda t: ravel_pytree(t)[0]) if self.covariance.ndim == 3 else None
        sd = flat(self.stderr) if flat else ravel_pytree(self.stderr)[0]
        outer = sd[..., :, None] * sd[..., None, :]
        return jnp.where(outer == 0, 0.0, self.covariance / jnp.where(outer == 0, 1.0, outer))
