"""``curve_fit``'s scipy keywords turned into a fixedopt solve: ``p0`` (from the
signature when None, a scalar, a start inside the bounds), ``method``, ``jac``,
``maxfev``/``max_nfev`` and the extra keywords scipy passes to its solvers.

Every ``method`` runs :class:`fixedopt.LevenbergMarquardt` (bounds handled by its
projected, active-set steps), whose answers are scipy's at its tolerances; what
``method`` keeps of scipy is the rule for the default (``"lm"`` without bounds,
``"trf"`` with them), the refusal of ``"lm"`` with bounds or a robust ``loss``, and
the covariance convention of a rank-deficient Jacobian (``inf`` with ``"lm"``, as
``leastsq``; the pseudo-inverse with ``"trf"``/``"dogbox"``, as ``least_squares``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._inputs.checks import integer
from fixedopt._inputs.validate import concrete_or_none

METHODS = ("lm", "trf", "dogbox")
FINITE_DIFFERENCES = ("2-point", "3-point", "cs")
# scipy's keywords for finite differences: fixedopt's derivatives are exact (JAX), so
# they have nothing to set; accepted so that scipy code runs, and documented.
NO_EFFECT = ("epsfcn", "diff_step")
# Keywords curve_fit sets itself; given, they would be overridden or collide.
CURVE_FIT_SETS = ("args", "args_axes", "batched", "bounds", "sigma", "estimator", "counts")
REFUSED = {
    "factor": "the initial step bound of MINPACK's lm",
    "diag": "MINPACK's variable scaling (fixedopt scales by the Jacobian's columns)",
    "col_deriv": "a column-major Jacobian (give `jac` returning one row per data point)",
    "tr_solver": "least_squares' trust-region solver",
    "tr_options": "least_squares' trust-region solver",
    "jac_sparsity": "least_squares' sparse finite differences",
}


def resolve_method(method: Any, bounded: bool, loss: Any) -> str:
    """scipy's ``method``: ``None`` is ``"lm"`` without bounds and ``"trf"`` with them;
    ``"lm"`` refuses bounds and robust losses, as in scipy."""
    if method is None:
        return "trf" if bounded else "lm"
    if not (isinstance(method, str) and method in METHODS):
        raise ValueError(f"`method` must be 'trf', 'dogbox' or 'lm' (or None), got {method!r}")
    if method == "lm" and bounded:
        raise ValueError(
            "Method 'lm' only works for unconstrained problems. Use 'trf' or 'dogbox' instead."
        )
    if method == "lm" and loss not in (None, "linear"):
        raise ValueError("method='lm' supports only 'linear' loss function; use 'trf'")
    return method


def solve_keywords(kwargs: dict[str, Any], allowed: set[str]) -> dict[str, Any]:
    """The extra keywords as ``least_squares`` options: ``maxfev``/``max_nfev`` become
    ``max_steps`` (one evaluation of the residuals and their Jacobian per step), scipy's
    finite-difference keywords have no effect, anything else must be an option of
    ``least_squares`` (``allowed``)."""
    options = dict(kwargs)
    if "args" in options:
        raise ValueError(
            "'args' is not a supported keyword argument: curve_fit calls f(xdata, *params); "
            "give other inputs of `f` by closing over them (a lambda or functools.partial)"
        )
    limits = {name: options.pop(name) for name in ("maxfev", "max_nfev", "max_steps")
              if options.get(name) is not None}  # fmt: skip
    for name in ("maxfev", "max_nfev", "max_steps"):
        options.pop(name, None)
    if len(limits) > 1:  # even equal: one name would be dropped without a word
        raise ValueError(
            f"give one iteration limit (`maxfev`, `max_nfev` and `max_steps` are one "
            f"limit), got {limits}"
        )
    if limits:
        name, value = next(iter(limits.items()))
        options["max_steps"] = integer(name, value, minimum=1, maximum=2**31 - 1)
    for name in NO_EFFECT:
        options.pop(name, None)
    if options.pop("verbose", 0) not in (0, False):
        raise ValueError("`verbose` is not supported: use progress=True with batched=True")
    x_scale = options.pop("x_scale", None)
    if not (x_scale is None or (isinstance(x_scale, str) and x_scale == "jac")):
        raise ValueError(
            f"`x_scale` must be 'jac' (or None), got {x_scale!r}: fixedopt's Levenberg-"
            "Marquardt scales the parameters by the Jacobian's column norms, as MINPACK "
            "does, so its steps do not depend on the parameters' units"
        )
    for name in sorted(set(options) & set(REFUSED)):
        raise TypeError(f"curve_fit does not support `{name}` ({REFUSED[name]}): remove it")
    for name in sorted(set(options) & set(CURVE_FIT_SETS)):
        raise TypeError(f"`{name}` is set by curve_fit itself: remove it")
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise TypeError(
            f"curve_fit() got unexpected keyword arguments {unknown}; it takes scipy's "
            f"keywords and the options of fixedopt.least_squares: {sorted(allowed)}"
        )
    return options


def jacobian(jac: Any, method: str) -> Callable[..., Any] | None:
    """``jac``: a callable ``jac(x, *p) -> (m, k)``, or None / one of scipy's
    finite-difference schemes (JAX's exact derivative then)."""
    if jac is None or callable(jac):
        return jac  # type: ignore[no-any-return]
    if isinstance(jac, str) and jac in FINITE_DIFFERENCES:
        if method == "lm":
            raise ValueError(f"jac={jac!r} is not supported by method 'lm' (scipy's rule)")
        return None
    raise ValueError(f"`jac` must be a callable, None, or one of {FINITE_DIFFERENCES}, got {jac!r}")


def feasible_start(lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """scipy's ``p0`` when it is None: 1, or the middle of two finite bounds, or 1
    inside a single finite one."""
    start = np.ones(np.broadcast_shapes(lower.shape, upper.shape))
    lower, upper = np.broadcast_to(lower, start.shape), np.broadcast_to(upper, start.shape)
    low, high = np.isfinite(lower), np.isfinite(upper)
    start = np.where(low & high, 0.5 * (lower + upper), start)
    start = np.where(low & ~high, lower + 1, start)
    return np.where(~low & high, upper - 1, start)


def least_squares_keywords(least_squares: Callable[..., Any]) -> set[str]:
    """The keyword options of ``least_squares`` (its keyword-only parameters)."""
    kinds = (inspect.Parameter.KEYWORD_ONLY,)
    parameters = inspect.signature(least_squares).parameters.values()
    return {p.name for p in parameters if p.kind in kinds} - set(CURVE_FIT_SETS)


def bound_arrays(bounds: Any) -> tuple[Any, Any] | None:
    """``(lower, upper)`` of scipy's forms (a pair or a ``Bounds``), or None for
    ``(-inf, inf)``."""
    if hasattr(bounds, "lb") and hasattr(bounds, "ub"):
        bounds = (bounds.lb, bounds.ub)
    if not (isinstance(bounds, (tuple, list)) and len(bounds) == 2):
        raise TypeError(f"`bounds` must be a pair (lower, upper) or a Bounds, got {bounds!r}")
    # scipy reads each side as an array: a tuple ((0, 0), (10, 10)) is two (k,) arrays
    lower, upper = (_side(b) for b in bounds)
    lower = -np.inf if lower is None else lower
    upper = np.inf if upper is None else upper
    lo, hi = concrete_or_none(lower), concrete_or_none(upper)
    if lo is not None and hi is not None and np.all(lo == -np.inf) and np.all(hi == np.inf):
        return None
    return lower, upper


def _side(side: Any) -> Any:
    """One side of scipy's bounds: a tuple or list of numbers as one array."""
    if isinstance(side, (tuple, list)):
        try:
            return np.asarray(side, float)
        except (TypeError, ValueError, jax.errors.TracerArrayConversionError):
            return side  # traced entries: the tree least_squares reads
    return side


def start_outside(p0: jax.Array, bounds: tuple[Any, Any] | None, batched: bool) -> jax.Array | None:
    """Per row (one flag without a batch), whether a traced ``p0`` lies outside
    ``bounds``; where both are concrete, scipy's ``ValueError`` naming the row and the
    entry, or None (as without bounds)."""
    if bounds is None:
        return None
    concrete = [concrete_or_none(a) for a in (p0, *bounds)]
    if any(a is None for a in concrete):  # traced: a per-row flag in the program
        lower, upper = (jnp.broadcast_to(jnp.asarray(b, p0.dtype), p0.shape) for b in bounds)
        return jnp.any((p0 < lower) | (p0 > upper), axis=-1)
    # Concrete: checked in NumPy (no small program compiled for each new shape).
    start = np.asarray(concrete[0])
    dtype = start.dtype
    lo, hi = (np.broadcast_to(np.asarray(b).astype(dtype), start.shape) for b in concrete[1:])
    crossed = lo > hi  # no start fits: the bounds are the mistake, said first
    if np.any(crossed):
        index, where = _first(crossed, batched)
        raise ValueError(
            f"`bounds`: lower must not exceed upper, got lower={lo[index]} > "
            f"upper={hi[index]} ({where}); equal bounds hold an entry at that value"
        )
    out = (start < lo) | (start > hi)
    if np.any(out):
        index, where = _first(out, batched)
        raise ValueError(
            f"Initial guess is outside of provided bounds: `p0` ({where}) is "
            f"{start[index]}, outside [{lo[index]}, {hi[index]}]. Start inside the bounds "
            "(curve_fit does not move a start onto them)"
        )
    return None


def _first(hits: np.ndarray, batched: bool) -> tuple[tuple[int, ...], str]:
    """The index of the first true entry of ``hits`` and where it is, in words."""
    index = tuple(int(i) for i in np.argwhere(hits)[0])
    return index, f"row {index[0]}, entry {index[1]}" if batched else f"entry {index[0]}"
