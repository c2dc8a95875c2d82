"""Robust losses for ``least_squares``, defined as ``scipy.optimize.least_squares``
defines them, and scipy's rescaling that runs them through the same Gauss–Newton step.

With residuals ``f`` and ``z = (f / f_scale)**2``, the cost is
``0.5 * sum(f_scale**2 * rho(z))``:

=========== =========================================
``linear``  ``rho(z) = z`` (ordinary least squares)
``soft_l1`` ``rho(z) = 2 * ((1 + z)**0.5 - 1)``
``huber``   ``rho(z) = z`` if ``z <= 1`` else ``2 * z**0.5 - 1``
``cauchy``  ``rho(z) = log1p(z)``
``arctan``  ``rho(z) = arctan(z)``
=========== =========================================

A solver that needs residuals and a Jacobian gets ``f * rho' / s`` and ``s * J``
with ``s = sqrt(rho' + 2 rho'' f**2 / f_scale**2)``, scipy's rescaling
(``scale_for_robust_loss_function``; Triggs et al., "Bundle adjustment — a modern
synthesis", 1999, section 4.3): ``J^T f`` is the exact gradient of the robust cost
and ``J^T J`` its Gauss–Newton approximation of the Hessian. One change: scipy
clamps ``s**2`` below at ``eps``, here at ``rho' / 10``. On an outlier of
``huber`` (``s**2 = 0`` exactly), ``cauchy`` or ``arctan`` the curvature correction
makes the model flat; scipy's trust region copes, but a Levenberg–Marquardt damping
relative to ``diag(J^T J)`` cannot, and a start where every residual is an outlier
stalled (measured: ``huber``/``cauchy``/``arctan`` rows gave up at 2-4x scipy's
cost). Ceres clamps for the same reason (``Corrector``: no correction where
``rho'' < 0``). The gradient is unchanged, so the minimizers are scipy's; only the
path to them differs.
"""

from __future__ import annotations

import abc
import dataclasses
import warnings
from collections.abc import Callable
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
from jax.scipy.special import xlogy

from fixedopt._inputs.checks import one_of, positive_float
from fixedopt._inputs.notices import caller_stacklevel

LOSSES = ("linear", "soft_l1", "huber", "cauchy", "arctan")

Rho = Callable[[jax.Array], jax.Array]  # z -> rho(z), element-wise


def _huber(z: jax.Array) -> jax.Array:
    return jnp.where(z <= 1, z, 2 * jnp.sqrt(jnp.maximum(z, 1)) - 1)


def _soft_l1(z: jax.Array) -> jax.Array:
    return 2 * (jnp.sqrt(1 + z) - 1)


_RHO: dict[str, Rho] = {
    "soft_l1": _soft_l1,
    "huber": _huber,
    "cauchy": jnp.log1p,
    "arctan": jnp.arctan,
}


class Loss(abc.ABC):
    """How a least-squares solve turns ``residual_fun``'s output into its cost, and
    the residuals and Jacobian its Gauss–Newton step sees (static: part of the program).

    Two kinds: a :class:`RobustLoss` of the residuals, and the :class:`Poisson`
    likelihood of a model against counts (``needs_data``: the last of the solve's
    ``args`` holds the data, which ``residual_fun`` does not receive).
    """

    needs_data: ClassVar[bool] = False
    # ``rescale``'s residuals are Pearson's, whose norm is not ``sqrt(2 cost)``: MINPACK's
    # cosine reads ``|r|`` from the cost instead (``Problem.likelihood``)
    likelihood: ClassVar[bool] = False
    name: str

    @abc.abstractmethod
    def cost(self, out: jax.Array, data: jax.Array | None) -> jax.Array:
        """The ``()`` cost of ``residual_fun``'s output ``out`` (any shape)."""

    @abc.abstractmethod
    def value_and_cotangent(
        self, out: jax.Array, data: jax.Array | None
    ) -> tuple[jax.Array, jax.Array]:
        """The cost and its derivative with respect to ``out``, ``(m,)`` (raveled)."""

    @abc.abstractmethod
    def rescale(
        self, out: jax.Array, jacobian: jax.Array, data: jax.Array | None
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """The cost and the ``(m,)`` residual and ``(m, n)`` Jacobian a Gauss–Newton
        step uses: ``J^T r`` is the cost's gradient, ``J^T J`` its model Hessian."""


@dataclasses.dataclass(frozen=True)
class RobustLoss(Loss):
    """A robust loss ``rho`` with its scale ``f_scale``.

    Attributes:
      rho: ``z -> rho(z)``, element-wise, traceable by JAX; its first and second
        derivatives are taken by automatic differentiation.
      f_scale: the soft margin between inlier and outlier residuals.
      name: the scipy name, or the callable's name.
    """

    rho: Rho
    f_scale: float
    name: str

    def terms(self, residual: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(rho, rho', rho'')`` at ``z = (residual / f_scale)**2``, element-wise,
        scaled as scipy scales them: ``rho * f_scale**2``, ``rho'``,
        ``rho'' / f_scale**2``. ``residual``: ``(m,)``; each result is ``(m,)``."""
        scale2 = jnp.asarray(self.f_scale, residual.dtype) ** 2
        z = residual**2 / scale2
        first = jax.grad(self.rho)
        values = self.rho(z)
        slopes = jax.vmap(first)(z)
        curvatures = jax.vmap(jax.grad(first))(z)
        return values * scale2, slopes, curvatures / scale2

    def cost(self, out: jax.Array, data: jax.Array | None = None) -> jax.Array:
        """``0.5 * sum(f_scale**2 * rho((out / f_scale)**2))``, a ``()`` array;
        ``out`` (the residuals) of any shape."""
        return 0.5 * jnp.sum(self.terms(jnp.ravel(out))[0])

    def value_and_cotangent(
        self, out: jax.Array, data: jax.Array | None = None
    ) -> tuple[jax.Array, jax.Array]:
        values, slopes, _ = self.terms(out)
        return 0.5 * jnp.sum(values), slopes * out

    def rescale(
        self, out: jax.Array, jacobian: jax.Array, data: jax.Array | None = None
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """The robust cost and the rescaled ``(residual, jacobian)`` (see the module).

        ``out``: the ``(m,)`` residual; ``jacobian``: ``(m, n)``. Returns the ``()``
        cost and the rescaled ``(m,)`` residual and ``(m, n)`` Jacobian."""
        values, slopes, curvatures = self.terms(out)
        eps = jnp.finfo(out.dtype).eps
        curvature = jnp.maximum(slopes + 2 * curvatures * out**2, slopes / 10)
        scale = jnp.sqrt(jnp.maximum(curvature, eps))
        return 0.5 * jnp.sum(values), out * slopes / scale, jacobian * scale[:, None]


@dataclasses.dataclass(frozen=True)
class Poisson(Loss):
    """Poisson maximum likelihood: ``residual_fun`` returns the model's expected
    counts ``mu``, the data (the last of ``args``) are the observed counts ``y``.

    The cost is half the Poisson deviance, ``sum(mu - y - y log(mu / y))`` (a term
    with ``y = 0`` is ``mu``): the negative log-likelihood up to a constant, 0 for a
    perfect model, and for large counts close to half the chi-square of
    ``(mu - y) / sqrt(mu)``. The Gauss–Newton step sees ``r = (mu - y) / sqrt(mu)``
    and ``J = J_mu / sqrt(mu)``: ``J^T r`` is the cost's exact gradient and
    ``J^T J`` the Fisher information, so Levenberg–Marquardt runs Fisher scoring
    (Laurence and Chromy, Nature Methods 7, 338, 2010; Gpufit's MLE estimator).
    A model value ``mu <= 0`` makes the cost infinite: Levenberg–Marquardt rejects
    that step like a non-finite one and raises its damping; a start there stops the
    row with ``Status.NONFINITE``, and so do NaN or negative counts.
    """

    needs_data: ClassVar[bool] = True
    likelihood: ClassVar[bool] = True
    name: str = "poisson"

    def _terms(self, mu: jax.Array, counts: jax.Array | None) -> tuple[jax.Array, jax.Array]:
        """The cost and the raveled ``(mu, counts)`` broadcast together."""
        if counts is None:
            raise TypeError("the Poisson likelihood needs the counts")
        counts = jnp.ravel(jnp.broadcast_to(counts, jnp.shape(mu)).astype(mu.dtype))
        mu = jnp.ravel(mu)
        positive = jnp.all(mu > 0)
        safe = jnp.where(mu > 0, mu, 1.0)
        terms = safe - counts - xlogy(counts, safe) + xlogy(counts, counts)
        cost = jnp.where(positive, jnp.sum(terms), jnp.inf)
        return cost, counts

    def cost(self, out: jax.Array, data: jax.Array | None) -> jax.Array:
        return self._terms(out, data)[0]

    def value_and_cotangent(
        self, out: jax.Array, data: jax.Array | None
    ) -> tuple[jax.Array, jax.Array]:
        cost, counts = self._terms(out, data)
        mu = jnp.ravel(out)
        return cost, (mu - counts) / jnp.where(mu > 0, mu, 1.0)

    def rescale(
        self, out: jax.Array, jacobian: jax.Array, data: jax.Array | None
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        cost, counts = self._terms(out, data)
        mu = jnp.ravel(out)
        root = jnp.sqrt(jnp.where(mu > 0, mu, 1.0))
        return cost, (mu - counts) / root, jacobian / root[:, None]


def split_data(
    loss: Loss | None, args: tuple[Any, ...]
) -> tuple[tuple[Any, ...], jax.Array | None]:
    """``(args of fun, data)``: a :class:`Loss` that ``needs_data`` (the Poisson
    likelihood's counts) reads the last of ``args``, which ``fun`` does not receive;
    otherwise ``(args, None)``."""
    if loss is None or not loss.needs_data:
        return args, None
    return args[:-1], args[-1]


def flat_counts(counts: jax.Array | None, shape: tuple[int, ...]) -> jax.Array | None:
    """One row's ``counts`` broadcast to its model output's ``shape`` and raveled, as the
    solvers ravel the output (None stays None)."""
    return None if counts is None else jnp.ravel(jnp.broadcast_to(counts, shape))


def robust_loss(loss: str | Rho, f_scale: float) -> RobustLoss | None:
    """The :class:`RobustLoss` for ``least_squares(loss=..., f_scale=...)``; None for linear.

    Args:
      loss: one of ``"linear"``, ``"soft_l1"``, ``"huber"``, ``"cauchy"``,
        ``"arctan"``, or a callable ``rho(z)`` (element-wise on a scalar ``z``,
        traceable by JAX, with ``rho(0) = 0``, ``rho'(0) = 1``, as scipy asks).
      f_scale: a positive number.

    Example:
      >>> import jax.numpy as jnp
      >>> loss = robust_loss("soft_l1", 2.0)
      >>> print(f"{loss.cost(jnp.array([0.0, 2.0])):.6f}")  # 0.5 * 4 * 2 (sqrt(2) - 1)
      1.656854
    """
    f_scale = positive_float("f_scale", f_scale)
    if callable(loss):
        _check_rho(loss)
        return RobustLoss(loss, f_scale, getattr(loss, "__name__", type(loss).__name__))
    loss = one_of("loss", loss, LOSSES, expected="or a callable rho(z)")
    if loss == "linear" and f_scale != 1.0:
        warnings.warn(
            f"f_scale={f_scale} has no effect with loss='linear' (scipy ignores it too): "
            "give a robust loss (e.g. loss='soft_l1') or remove f_scale",
            UserWarning,
            stacklevel=caller_stacklevel(),
        )
    return None if loss == "linear" else RobustLoss(_RHO[loss], f_scale, loss)


def _check_rho(rho: Rho) -> None:
    """A callable ``loss`` is ``rho`` alone, element-wise and traceable by JAX: a
    ``TypeError`` naming ``loss`` otherwise (scipy's callable, which returns ``rho``,
    ``rho'`` and ``rho''`` stacked as ``(3, m)`` in NumPy, would fail deep in the solve)."""
    z = jax.ShapeDtypeStruct((2,), jnp.float32)
    scipy_form = (
        "`loss` must be a function rho(z) that JAX can trace (jax.numpy), returning rho "
        "element-wise (one value per z; fixedopt takes rho' and rho'' by automatic "
        "differentiation, where scipy's callable loss returns all three stacked as (3, m))"
    )
    try:
        out = jax.eval_shape(rho, z)
    except Exception as error:
        raise TypeError(f"{scipy_form}; calling it on a traced z failed: {error}") from error
    if getattr(out, "shape", None) != z.shape:
        raise TypeError(
            f"{scipy_form}; got shape {getattr(out, 'shape', None)} for z of shape (2,)"
        )
