"""Variants of fixedopt's Levenberg-Marquardt, as a subclass (fixedopt/ is not edited).

``VariantLM.step`` is a copy of ``LevenbergMarquardt.step`` (fixedopt at 54b1979) with
knobs; at its defaults it is the library's step, bit for bit (checked by
``compare.py``: the ``main`` and ``copy`` columns). The knobs:

- ``rule``: the damping update. ``"nielsen"`` (the library's: shrink by
  ``max(1/3, 1 - (2 rho - 1)^3)`` on an accepted step, grow by a doubling factor on a
  rejected one); ``"marquardt"`` (/10 on accept, x10 on reject); ``"minpack"`` (Moré's
  trust region, MINPACK's ``lmder``: the radius ``Delta`` of ``|D s| <= Delta`` is
  updated from the gain ratio and the damping ``par`` is found for it by ``lmpar``'s
  safeguarded Newton iteration, at most 10 solves of the 8x8 system per step).
- ``initial_damping``: as the library's (relative to ``D^2``); ``shrink``: Nielsen's
  smallest factor on an accepted step (the library's: 1/3).
- ``decay``: ``D^2 = max(diag(J^T J), decay * D^2_old)`` on an accepted step: 1 is
  the library's running max (Moré 1978), 0 the current ``diag(J^T J)`` (Marquardt
  1963), in between a running max that forgets (by ``decay`` per accepted step).
- ``accept``: the smallest gain ratio accepted (the library's: 1e-4).
- ``geodesic``: Transtrum's geodesic acceleration with this ``alpha`` (0: off): the
  trial is ``v + a/2``, ``a`` solving the damped system for ``-J^T r''(v, v)``, and a
  trial with ``2 |D a| / |D v| > alpha`` is rejected (``soft``: taken as ``v`` alone);
  the second directional derivative ``r''(v, v)`` by nested ``jax.jvp``, one more
  evaluation per step.
- ``trace``: record every trial through ``jax.debug.callback`` into ``TRACE``;
  ``scale0``: a starting ``D^2`` (its max with ``diag(J^T J)``), for restarts.

The driver (stopping rules, statuses, lanes) is the library's: every variant is passed
as ``solver=`` to ``fixedopt.least_squares`` / ``fixedopt.curve_fit``.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._contract.solver import Problem, Step, StepContext
from fixedopt._numerics import reduce
from fixedopt._solvers import small_linalg
from fixedopt._solvers.gauss_newton import (
    _EPS_FACTOR,
    _UNDAMPED,
    LevenbergMarquardt,
    _eps,
    _outcome,
    _residuals,
    _trapped,
    cauchy_reduction,
    gauss_newton_model,
    normal_equations_step,
    relative_step_size,
    short_of_bounds,
)

TRACE: list[dict] = []  # filled by a solver with trace=True (one row at a time)


class VariantState(NamedTuple):
    normal: jax.Array
    residual_norm: jax.Array
    damping: jax.Array  # Nielsen/Marquardt: the damping; minpack: lmpar's par
    growth: jax.Array
    scale: jax.Array
    walls: jax.Array
    short: jax.Array
    radius: jax.Array  # minpack: the trust radius Delta (unused otherwise)
    first: jax.Array  # () bool: no trial made yet (minpack: Delta = min(Delta, |D p|))


MINPACK_FACTOR = 100.0  # lmder's default: Delta_0 = factor |D x0|


def _safe_scale(scale: jax.Array, free: jax.Array) -> jax.Array:
    """``D^2`` as ``normal_equations_step`` floors it."""
    floor = jnp.finfo(scale.dtype).eps * reduce.largest(jnp.where(free, scale, 0.0), initial=0.0)
    return jnp.maximum(scale, jnp.maximum(floor, jnp.finfo(scale.dtype).tiny))


def lmpar(normal, grad, free, scale, radius, par0):
    """MINPACK's ``lmpar`` on the normal equations: ``par >= 0`` such that
    ``|D s(par)|`` is within 10% of ``radius`` (0 where the Gauss-Newton step is inside
    1.1 ``radius``), ``s(par)`` solving ``(J^T J + par D^2) s = -g`` on ``free``.
    Newton's iteration on ``1/|D s|`` safeguarded by ``[parl, paru]``, at most 10 solves
    (lmpar's limit). Returns ``par``."""
    d2 = jnp.where(free, _safe_scale(scale, free), 0.0)
    tiny = jnp.finfo(grad.dtype).tiny

    def solve(par):
        return normal_equations_step(normal, grad, free, par, scale)

    def dnorm(p):
        return jnp.sqrt(reduce.dot(d2 * p, p))

    def correction(par, p, pn):  # Newton step for phi(par) = |D s| - radius, on 1/|D s|
        w = d2 * p
        a_inv_w = -normal_equations_step(normal, w, free, par, scale)  # A^-1 w
        denominator = reduce.dot(w, a_inv_w)
        return ((pn - radius) / radius) * pn**2 / jnp.where(denominator > 0, denominator, 1.0)

    gauss_newton = solve(jnp.asarray(_UNDAMPED, grad.dtype))
    gn_norm = dnorm(gauss_newton)
    inside = gn_norm - radius <= 0.1 * radius
    parl = jnp.maximum(correction(_UNDAMPED, gauss_newton, gn_norm), 0.0)
    gnorm = jnp.sqrt(reduce.dot(jnp.where(free, grad**2 / jnp.where(free, d2, 1.0), 0.0), 1.0))
    paru = gnorm / radius
    paru = jnp.where(paru == 0, tiny / jnp.minimum(radius, 0.1), paru)
    par = jnp.clip(par0, parl, paru)
    par = jnp.where(par == 0, gnorm / jnp.where(gn_norm > 0, gn_norm, 1.0), par)

    def body(_, carry):
        par, parl, paru, done = carry
        par = jnp.where(par == 0, jnp.maximum(tiny, 1e-3 * paru), par)
        p = solve(par)
        pn = dnorm(p)
        fp = pn - radius
        converged = jnp.abs(fp) <= 0.1 * radius
        parc = correction(par, p, pn)
        new_parl = jnp.where(fp > 0, jnp.maximum(parl, par), parl)
        new_paru = jnp.where(fp < 0, jnp.minimum(paru, par), paru)
        new_par = jnp.maximum(new_parl, par + parc)
        stop = done | converged
        return (
            jnp.where(stop, par, new_par),
            jnp.where(stop, parl, new_parl),
            jnp.where(stop, paru, new_paru),
            stop,
        )

    par, _, _, _ = jax.lax.fori_loop(0, 10, body, (par, parl, paru, jnp.zeros((), bool)))
    return jnp.where(inside, 0.0, par)


@dataclasses.dataclass(frozen=True)
class VariantLM(LevenbergMarquardt):
    rule: str = "nielsen"
    decay: float = 1.0
    shrink: float = 1.0 / 3.0  # Nielsen: the smallest factor of an accepted step
    accept: float = 1e-4
    geodesic: float = 0.0
    soft: bool = False  # geodesic: too large an acceleration drops it (not the trial)
    trace: bool = False
    scale0: tuple[float, ...] | None = None  # restarts: D^2 = max(diag(J^T J), scale0)

    def start(self, problem: Problem, x: jax.Array):
        value, grad, s = super().start(problem, x)
        if self.scale0 is not None:
            given = jnp.asarray(self.scale0, s.scale.dtype)
            s = s._replace(scale=problem.free_part(jnp.maximum(s.scale, given)))
        radius = MINPACK_FACTOR * jnp.sqrt(reduce.dot(s.scale * x, x))
        radius = jnp.where(radius > 0, radius, MINPACK_FACTOR)
        damping = jnp.zeros_like(s.damping) if self.rule == "minpack" else s.damping
        state = VariantState(s.normal, s.residual_norm, damping, s.growth, s.scale, s.walls,
                             s.short, radius, jnp.ones((), bool))  # fmt: skip
        return value, grad, state

    def step(
        self, problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array,
        state: VariantState, context: StepContext,
    ) -> Step[VariantState]:  # fmt: skip
        free = ~problem.fixed & ~problem.at_bound(x, grad, 0.0)
        if self.rule == "minpack":
            par = lmpar(state.normal, grad, free, state.scale, state.radius, state.damping)
            damping_used = jnp.where(par == 0, jnp.asarray(_UNDAMPED, par.dtype), par)
        else:
            damping_used = state.damping
        dampings = jnp.stack([damping_used, jnp.asarray(_UNDAMPED, state.damping.dtype)])

        def solve(damping: jax.Array) -> jax.Array:
            return normal_equations_step(state.normal, grad, free, damping, state.scale)

        step, gauss_newton = jax.vmap(solve)(dampings)
        velocity = step
        bent = jnp.zeros((), bool)  # geodesic: acceleration too large, the trial refused
        if self.geodesic > 0:
            res = lambda z: _residuals(problem, z)[0]
            _, jacobian_x = _residuals(problem, x)
            rvv = jax.jvp(lambda z: jax.jvp(res, (z,), (velocity,))[1], (x,), (velocity,))[1]
            accel = normal_equations_step(
                state.normal, jacobian_x.T @ rvv, free, damping_used, state.scale
            )
            d = jnp.sqrt(state.scale)
            ratio = 2 * reduce.norm(d * accel) / jnp.maximum(reduce.norm(d * velocity), 1e-300)
            bent = ~(ratio <= self.geodesic)
            step = velocity + jnp.where(bent & self.soft, 0.0, 0.5) * accel
            bent = bent & (not self.soft)
        x_trial = short_of_bounds(problem, x, x + step, state.short)
        step = problem.free_part(x_trial - x)
        residual, jacobian = _residuals(problem, x_trial)
        normal, trial_grad, squared = small_linalg.normal_sums(jacobian, residual)
        robust = problem.robust
        trial_value = problem.residual_value(x_trial, residual) if robust else 0.5 * squared
        wide_step = step.astype(state.normal.dtype)
        curvature = reduce.dot(wide_step, small_linalg.matvec(state.normal, wide_step))
        curvature = curvature.astype(x.dtype)
        predicted, _ = gauss_newton_model(problem, x, grad, curvature, step, state.scale)
        relative_step = relative_step_size(problem, x, gauss_newton, state.scale)
        gain = (value - trial_value) / jnp.where(predicted > 0, predicted, 1.0)
        finite = jnp.isfinite(trial_value) & jnp.all(jnp.isfinite(normal))
        trapped = _trapped(problem, x, x_trial, state.normal, normal)
        any_trapped = reduce.any_true(trapped)
        accepted = finite & (predicted > 0) & (gain > self.accept) & ~any_trapped & ~bent
        damping, growth, radius = self._next(
            state, accepted, gain, any_trapped, damping_used, step, value, trial_value,
            curvature, finite,
        )  # fmt: skip

        def keep(new: jax.Array, old: jax.Array) -> jax.Array:
            return jnp.where(accepted, new, old)

        diagonal = problem.free_part(jnp.diagonal(normal).astype(x.dtype))
        scale = jnp.maximum(diagonal, self.decay * state.scale) if self.decay else diagonal
        new_state = VariantState(
            keep(normal, state.normal),
            keep(jnp.sqrt(squared), state.residual_norm),
            damping,
            growth,
            keep(scale, state.scale),
            jnp.where(accepted, 0, state.walls + (~finite).astype(jnp.int32)),
            state.short | trapped,
            radius,
            jnp.zeros((), bool),
        )
        rounding = _EPS_FACTOR * _eps(value) * value
        no_progress = ~reduce.any_true(step != 0) | ((predicted >= 0) & (predicted <= rounding))
        if self.rule == "minpack":  # lmder gives up when Delta <= eps |D x| (its xtol)
            dx = jnp.sqrt(reduce.dot(state.scale * x, x))
            spent = (radius <= _eps(value) * dx) | (damping > self.max_damping)
        else:
            spent = damping > self.max_damping
        walled = new_state.walls > 0
        outcome = _outcome(accepted, finite, no_progress, spent, walled)
        cauchy = cauchy_reduction(state.normal, grad, free, state.scale, self.initial_damping)
        if self.trace:
            jax.debug.callback(
                _record, x, value, trial_value, damping_used, gain, predicted, step,
                state.scale, accepted, state.radius, relative_step, grad,
                state.residual_norm, gauss_newton, jnp.diagonal(state.normal),
            )  # fmt: skip
        return Step(
            x=x_trial,
            value=trial_value,
            grad=trial_grad,
            state=new_state,
            outcome=outcome,
            predicted=jnp.maximum(jnp.maximum(predicted, cauchy), 0.0),
            relative_step=relative_step,
        )

    def _next(self, state, accepted, gain, trapped, used, step, value, trial_value,
              curvature, finite):  # fmt: skip
        """``(damping, growth, radius)`` after a trial."""
        if self.rule == "nielsen":
            shrink = jnp.maximum(self.shrink, 1.0 - (2.0 * gain - 1.0) ** 3)
            damping = jnp.where(accepted, state.damping * shrink, state.damping * state.growth)
            growth = jnp.where(accepted, 2.0, 2.0 * state.growth)
            radius = state.radius
        elif self.rule == "marquardt":
            damping = jnp.where(accepted, state.damping / 10.0, state.damping * 10.0)
            damping = jnp.maximum(damping, 1e-12)
            growth, radius = state.growth, state.radius
        else:  # minpack (lmder's update of Delta and par)
            pnorm = jnp.sqrt(reduce.dot(state.scale * step, step))
            radius = jnp.where(state.first, jnp.minimum(state.radius, pnorm), state.radius)
            ratio = jnp.where(finite, gain, -jnp.inf)
            actred = jnp.where(
                finite & (0.1 * jnp.sqrt(trial_value) < jnp.sqrt(value)),
                1.0 - trial_value / value,
                -1.0,
            )
            dirder = -(curvature + used * pnorm**2) / (2.0 * value)
            temp = jnp.where(actred >= 0, 0.5, 0.5 * dirder / (dirder + 0.5 * actred))
            temp = jnp.where((actred == -1.0) | ~(temp >= 0.1), 0.1, temp)
            shrunk = temp * jnp.minimum(radius, pnorm / 0.1)
            bad = ~(ratio > 0.25)
            good = ~bad & ((used <= _UNDAMPED) | (ratio >= 0.75))
            par = jnp.where(used <= _UNDAMPED, 0.0, used)
            damping = jnp.where(bad, par / temp, jnp.where(good, 0.5 * par, par))
            radius = jnp.where(bad, shrunk, jnp.where(good, pnorm / 0.5, radius))
            growth = state.growth
        return (
            jnp.where(trapped, state.damping, damping),
            jnp.where(trapped, state.growth, growth),
            radius,
        )


def _record(x, value, trial, damping, gain, predicted, step, scale, accepted, radius,
            relative_step, grad, residual_norm, gauss_newton, diagonal):  # fmt: skip
    x, step, scale, grad, gauss_newton, diagonal = (
        np.asarray(a) for a in (x, step, scale, grad, gauss_newton, diagonal)
    )
    d = np.sqrt(scale)
    TRACE.append({
        "value": float(value), "trial": float(trial), "damping": float(damping),
        "gain": float(gain), "predicted": float(predicted), "accepted": bool(accepted),
        "radius": float(radius), "scaled_step": float(np.linalg.norm(d * step)),
        "relative_step": float(relative_step), "x": x.tolist(), "step": step.tolist(),
        "scale": scale.tolist(), "grad": grad.tolist(), "residual_norm": float(residual_norm),
        "gauss_newton": gauss_newton.tolist(), "diagonal": diagonal.tolist(),
        "scaled_gauss_newton": float(np.linalg.norm(d * gauss_newton)),
        "scaled_x": float(np.linalg.norm(d * x)),
    })  # fmt: skip


VARIANTS = {  # name: the solver (copy: the library's step, copied: must equal main)
    "copy": VariantLM(),
    "nielsen_l0=1": VariantLM(initial_damping=1.0),
    "nielsen_l0=0.3": VariantLM(initial_damping=0.3),
    "nielsen_l0=0.1": VariantLM(initial_damping=0.1),
    "nielsen_l0=0.03": VariantLM(initial_damping=0.03),
    "l0=0.1,shrink=0.1": VariantLM(initial_damping=0.1, shrink=0.1),
    "nielsen_l0=1e-2": VariantLM(initial_damping=1e-2),
    "nielsen_l0=1e-6": VariantLM(initial_damping=1e-6),
    "marquardt": VariantLM(rule="marquardt"),
    "minpack": VariantLM(rule="minpack"),
    "current_D": VariantLM(decay=0.0),
    "decay_D=0.5": VariantLM(decay=0.5),
    "decay_D=0.9": VariantLM(decay=0.9),
    "accept>0.1": VariantLM(accept=0.1),
    "geodesic": VariantLM(geodesic=0.75),
    "geodesic_soft": VariantLM(geodesic=0.75, soft=True),
}
