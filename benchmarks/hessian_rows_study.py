"""Study (issue 59): can the five accurate float32 rows of status_truth's ``hessian``
table (L-BFGS, ``scaling="hessian"``; Beale from 10x its start, the power law from its
first start) that end STALLED honestly end CONVERGED?

Run from the repository root: ``python -m benchmarks.hessian_rows_study`` (~2 min CPU);
with ``--trials 24`` the rows again with 24 halvings of the check's step where a rejected
claim leaves its point (``fixedopt._driver.leave_start.TRIALS``, 8), so that they move on.
Prints, per row: the status, ``x``, ``f``, the gap to the infimum or minimum, the
suite's allowance and the certificate's (``CERTIFY_SHARE`` of it), and the float64
check at ``x``; then how far each problem's honest CONVERGED is from the rows.
"""

import itertools
import math
import sys

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize

jax.config.update("jax_enable_x64", True)

import fixedopt  # noqa: E402
from benchmarks import status_truth  # noqa: E402
from fixedopt import testing_problems as known  # noqa: E402
from fixedopt._solvers.certify import newton_parts  # noqa: E402

EPS32, EPS64 = float(np.finfo(np.float32).eps), float(np.finfo(np.float64).eps)
SHARE = 0.01  # fixedopt._driver.loop.CERTIFY_SHARE
TIGHT = {"method": "lm", "xtol": 1e-15, "ftol": 1e-15, "gtol": 1e-15}
C = (1.5 + 2 * 2.25 + 3 * 2.625) / 14  # Beale's valley: x1 (x2 - 1) -> C as x1 -> -inf
BEALE_INF = 0.5 * ((1.5 - C) ** 2 + (2.25 - 2 * C) ** 2 + (2.625 - 3 * C) ** 2)


def half_squares(name):
    residuals = known.MINIMIZE[name].residuals
    return jax.jit(lambda x: 0.5 * jnp.sum(residuals(x) ** 2))


def check(fun, x, f0):
    """The float64 check at ``x`` (``fixedopt._solvers.certify.newton_parts``, every entry
    free): (smallest eigenvalue of the Jacobi-scaled Hessian, negative curvature found,
    half the decrement, the certificate's allowance)."""
    x = jnp.asarray(x, jnp.float64)
    f, g = fun(x), jax.grad(fun)(x)
    decrement, _, negative = newton_parts(
        lambda v: jax.jvp(jax.grad(fun), (x,), (v,))[1], g, f, jnp.ones(x.shape, bool)
    )
    h = np.asarray(jax.hessian(fun)(x))
    s = 1 / np.sqrt(np.abs(np.diag(h)))
    smallest = np.linalg.eigvalsh(s[:, None] * h * s[None, :])[0]
    f = float(f)
    allowed = SHARE * math.sqrt(EPS32) * max(abs(f), EPS32 * max(f0 - f, 0.0))
    return smallest, bool(negative), 0.5 * float(decrement), allowed


def rows():
    """The ten float32 rows of both problems' starts, as the suite runs them."""
    chosen = {name: known.MINIMIZE[name] for name in ("beale", "power_law")}
    solver = fixedopt.LBFGS(scaling="hessian")
    for name, problem in chosen.items():
        index = 1 if name == "beale" else 0
        x0 = jnp.asarray([problem.starts[index]] * 3, jnp.float32)
        scales = jnp.asarray(known.SCALES, jnp.float32)
        solution = fixedopt.minimize(known.objective(problem.residuals), x0, False,
                                     args=(scales,), batched=True, args_axes=0,
                                     solver=solver)  # fmt: skip
        names = status_truth.status_names(solution)
        fun, f0 = half_squares(name), None
        f0 = float(fun(jnp.asarray(problem.starts[index], jnp.float64)))
        for row, scale in enumerate(known.SCALES):
            x = np.asarray(solution.x[row], np.float64)
            verdict = known.judge(problem.residuals, np.asarray(problem.starts[index]), x,
                                  np.float32)  # fmt: skip
            lowest = BEALE_INF if name == "beale" else float(fun(jnp.asarray(x))) - verdict["gap"]
            f = float(fun(jnp.asarray(x)))
            eigenvalue, negative, half, allowed = check(fun, x, f0)
            print(
                f"{name} start {index} scale {scale:g}: {names[row]}, {int(solution.steps[row])} "
                f"steps; x = {x.tolist()}; f = {f:.8g}; gap {f - lowest:.3g} (suite's "
                f"allowance {verdict['allowed']:.3g}, accurate {verdict['accurate']}; "
                f"certificate's {allowed:.3g}, gap/that {(f - lowest) / allowed:.1f}); "
                f"check: smallest scaled eigenvalue {eigenvalue:.3g}, negative curvature "
                f"{negative}, half decrement {half:.3g}, certifies {half <= allowed}"
            )


def beale_valley():
    """Along the floor of Beale's valley: the gap to its infimum, half the float64
    check's decrement and the certificate's allowance."""
    fun = half_squares("beale")
    f0 = float(fun(jnp.asarray([10.0, 10.0])))
    print(f"beale: infimum {BEALE_INF:.7g} as x1 -> -inf (not attained), f(x0) {f0:.4g}")
    for x1 in (-2e3, -4e3, -5e3, -6e3, -1e4, -2e4, -4e4, -1e5):
        floor = scipy.optimize.minimize_scalar(
            lambda y, x1=x1: float(fun(jnp.asarray([x1, y]))),
            bounds=(1 + 0.5 * C / -x1, 1 + 2 * C / -x1),
            method="bounded",
            options={"xatol": 1e-14},
        )
        x = np.array([x1, floor.x])
        eigenvalue, _, half, allowed = check(fun, x, f0)
        gap = float(fun(jnp.asarray(x))) - BEALE_INF
        print(f"  x1 = {x1:.0e}: gap {gap:.3g}, half decrement {half:.3g} (gap / it "
              f"{gap / half:.1f}), allowance {allowed:.3g}, certified {half <= allowed}, "
              f"gap / allowance {gap / allowed:.2f}, smallest eigenvalue "
              f"{eigenvalue:.2g}")  # fmt: skip


def power_law_reach():
    """The power law's minimum: float32 points near it, and the float64 work from the
    stalled point to within the certificate's allowance."""
    residuals = known.MINIMIZE["power_law"].residuals
    fun = half_squares("power_law")
    f0 = float(fun(jnp.asarray(known.MINIMIZE["power_law"].starts[0], jnp.float64)))
    stalled = np.array([-2318.26367, 45.8538055, 0.947102785])  # scale 1's row
    polish = scipy.optimize.least_squares(lambda z: np.asarray(residuals(jnp.asarray(z))),
                                          stalled, **TIGHT)  # fmt: skip
    x_star, f_star = polish.x, float(fun(jnp.asarray(polish.x)))
    allowed = SHARE * math.sqrt(EPS32) * EPS32 * (f0 - f_star)
    print(f"power law: x* = {x_star.tolist()}, f* = {f_star:.7g}, certificate's allowance "
          f"{allowed:.3g}; MINPACK from the stalled point: {polish.nfev} evaluations")  # fmt: skip
    gaps = []
    scipy.optimize.minimize(lambda z: float(fun(jnp.asarray(z))), stalled,
                            jac=lambda z: np.asarray(jax.grad(fun)(jnp.asarray(z))),
                            hess=lambda z: np.asarray(jax.hessian(fun)(jnp.asarray(z))),
                            method="trust-exact", options={"gtol": 1e-14},
                            callback=lambda z, *_: gaps.append(float(fun(jnp.asarray(z))) - f_star))  # fmt: skip  # noqa: E501
    first = next(i + 1 for i, gap in enumerate(gaps) if gap <= allowed)
    print(f"  float64 trust-region Newton (exact Hessian) from it: within the allowance after "
          f"{first} iterations (gaps {', '.join(f'{g:.2g}' for g in gaps[:5])}, ...)")  # fmt: skip
    f32 = lambda z: float(0.5 * jnp.sum(residuals(jnp.asarray(z, jnp.float32)) ** 2))
    rng = np.random.default_rng(0)
    for label, x in (("stalled point", stalled), ("x*", x_star)):
        bits = np.asarray(x, np.float32).view(np.int32)
        errors = [f32(z) - float(fun(jnp.asarray(z, jnp.float64)))
                  for z in ((bits + rng.integers(-4, 5, 3).astype(np.int32)).view(np.float32)
                            for _ in range(200))]  # fmt: skip
        print(f"  float32 f's error within 4 ulps of the {label}: std {np.std(errors):.2g}, "
              f"largest {np.max(np.abs(errors)):.2g}")  # fmt: skip
    bits = np.asarray(x_star, np.float32).view(np.int32)
    flagged = certified = 0
    for offset in itertools.product(range(-2, 3), repeat=3):
        z = (bits + np.asarray(offset, np.int32)).view(np.float32).astype(np.float64)
        _, negative, half, allowance = check(fun, z, f0)
        flagged += negative
        certified += half <= allowance
    print(f"  the 125 float32 points within 2 ulps of x*: {certified} certified by the float64 "
          f"check, {flagged} flagged for negative curvature")  # fmt: skip


def along_step(fun, x):
    """At ``x``: the float64 check's half decrement (the predicted reduction), the
    reduction its Newton step ``d`` makes, and the curvature along ``d`` at ``x + d``
    over that at ``x`` (1 where the quadratic model holds over its own step)."""
    x = jnp.asarray(x, jnp.float64)
    product = lambda z, v: jax.jvp(jax.grad(fun), (z,), (v,))[1]
    decrement, d, _ = newton_parts(lambda v: product(x, v), jax.grad(fun)(x), fun(x),
                                   jnp.ones(x.shape, bool))  # fmt: skip
    ratio = float(d @ product(x + d, d)) / float(d @ product(x, d))
    return 0.5 * float(decrement), float(fun(x) - fun(x + d)), ratio


def power_law_model():
    """Whether the quadratic model holds over the Newton step at the three certified
    power-law points 37-39x their allowance (--trials 24's rows) and at the certified
    float32 points within 2 ulps of x*."""
    fun = half_squares("power_law")
    for x in ([-2318.10888671875, 45.85289001464844, 0.9471137523651123],
              [-2321.08984375, 45.86656951904297, 0.9468849301338196],
              [-2320.16455078125, 45.862388610839844, 0.9469561576843262]):  # fmt: skip
        predicted, made, ratio = along_step(fun, x)
        print(f"power law at {x}: predicted {predicted:.3g}, made {made:.3g}, curvature "
              f"along the step at its end / at its start {ratio:.3f}")  # fmt: skip
    residuals = known.MINIMIZE["power_law"].residuals
    start = np.array([-2450.6, 46.434, 0.93729])
    x_star = scipy.optimize.least_squares(
        lambda z: np.asarray(residuals(jnp.asarray(z))), start, **TIGHT
    ).x
    bits, ratios = np.asarray(x_star, np.float32).view(np.int32), []
    f0 = float(fun(jnp.asarray(known.MINIMIZE["power_law"].starts[0], jnp.float64)))
    for offset in itertools.product(range(-2, 3), repeat=3):
        z = (bits + np.asarray(offset, np.int32)).view(np.float32).astype(np.float64)
        _, negative, half, allowance = check(fun, z, f0)
        if not negative and half <= allowance:
            ratios.append(along_step(fun, z)[2])
    held = sum(abs(r - 1) <= 0.1 for r in ratios)
    print(
        f"  near x*, the {len(ratios)} certified float32 points: that ratio within 10% of 1 "
        f"at {held}; the others {sorted(float(f'{r:.3g}') for r in ratios if abs(r - 1) > 0.1)}"
    )


if __name__ == "__main__":
    if "--trials" in sys.argv:
        from fixedopt._driver import leave_start

        leave_start.TRIALS = int(sys.argv[sys.argv.index("--trials") + 1])
        rows()
        sys.exit()
    rows()
    beale_valley()
    power_law_reach()
    power_law_model()
