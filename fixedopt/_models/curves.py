"""The per-fit arrays a :class:`~fixedopt.models.ModelResult` computes after the solve:
the tied and derived parameters (with their derivatives in the fitted ones, for the
errors) when the fit returns, in the covariance's program (:class:`Computed`); the
curves (best and initial fit, residual) when first read. A fit whose curves nobody
reads compiles no program for them (a compile is most of a first call's wait: issue 40).

Each runs in chunks of a fixed number of rows at the top level on the CPU
(:func:`fixedopt._numerics.buckets.in_chunks`): a new batch size compiles nothing new.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._models.layout import Layout
from fixedopt._numerics import buckets, cpu_compiler


@dataclasses.dataclass(frozen=True)
class Computed:
    """The tied and derived parameters of ONE fit, ``(values, jac)``: ``(c,)`` and their
    derivatives in the fitted ones ``(c, k)``, from its vector ``p`` and the fit's
    ``args`` (its tie codes among them: ``residual.unpack``). Computed in the
    covariance's program (:func:`fixedopt._results.covariance.covariance_and`), not in
    one of its own; hashed by the layout and the residual, as the covariance is."""

    plan: Layout
    residual: Any  # fixedopt._models.fit._Residual

    def __call__(self, p: jax.Array, args: tuple[Any, ...]) -> tuple[jax.Array, jax.Array]:
        codes = self.residual.unpack(tuple(args[2:]))[1]  # args: (x, data, *extra)

        def of_p(p: jax.Array) -> tuple[jax.Array, jax.Array]:
            values = self.plan.values(p, codes)
            out = jnp.stack([values[name] for name in self.plan.computed])
            return out, out  # jacfwd(has_aux=True): derivatives and values at once

        jac, values = jax.jacfwd(of_p, has_aux=True)(p)
        return values, jac


def curves(residual: Any, x_axis: int | None, x: Any, p0: Any, xs: tuple[Any, ...],
           data: Any, extra: tuple[Any, ...]) -> tuple[np.ndarray, ...]:  # fmt: skip
    """``(best_fit, init_fit, residual)`` ``(B, m)`` of the fits at ``x`` and ``p0``
    (one evaluation of the model for both), ``residual`` the fit's own
    (:class:`fixedopt._models.fit._Residual`)."""
    inputs = (x, p0, xs, data, extra)
    flags = (True, True, jax.tree.map(lambda _: x_axis == 0, xs), True,
             jax.tree.map(lambda _: True, extra))  # fmt: skip
    compute = functools.partial(_curves, residual, x_axis)
    found = buckets.map_in_chunks(compute, inputs, tuple(jax.tree.leaves(flags)), x.shape[0])
    return tuple(np.asarray(a) for a in found)


def _curve_rows(
    residual: Any, x_axis: int | None, x: jax.Array, p0: jax.Array,
    xs: tuple[jax.Array, ...], data: jax.Array, extra: tuple[jax.Array, ...],
) -> tuple[jax.Array, jax.Array, jax.Array]:  # fmt: skip
    """The best and initial curves and the residuals: one program per model and layout."""
    weights, codes = residual.unpack(extra)
    codes = jnp.zeros((x.shape[0], 0), jnp.int32) if codes is None else codes
    both = jax.vmap(residual.curve, in_axes=(0, None, None))  # best and initial, one fit
    fits = jax.vmap(both, in_axes=(0, x_axis, 0))(jnp.stack([x, p0], axis=1), xs, codes)
    best_fit, init_fit = fits[:, 0], fits[:, 1]
    return best_fit, init_fit, residual.of_curve(best_fit, data, weights)


# Compiled with XLA:CPU's elemental emitter at the top level (fixedopt._numerics.cpu_compiler).
_curves = cpu_compiler.jit_for_cpu(_curve_rows, static_argnums=(0, 1))
