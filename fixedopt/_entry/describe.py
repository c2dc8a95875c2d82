"""One call described once: the static :class:`~fixedopt._driver.plan.Plan` and the
traced :class:`~fixedopt._driver.plan.Inputs` that the driver reads, each keyword
validated once on the way.

``minimize`` and ``least_squares`` share their keywords: :class:`SolveOptions` defines
them (for type checkers) and :data:`DEFAULTS` their defaults; :func:`with_options`
gives each entry point the signature that ``help``, ``inspect`` and the docs show.
Options that would be silently ignored raise: ``args_axes``, ``lanes``, ``progress``
and ``vectorized`` apply only to a batch (``batched=True``), and ``lanes``,
``progress`` and ``vectorized`` not to an unrolled solve (``differentiate="unroll"``
runs fixed-length scans over the whole batch, and reverse mode cannot pass a
vectorized objective's batching rule).
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Callable
from typing import Any, TypedDict, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._contract.solver import Solver
from fixedopt._derivatives.differentiation import Differentiation, differentiation_option
from fixedopt._driver.loop import Stopping, Tolerances
from fixedopt._driver.plan import Inputs, Plan
from fixedopt._driver.progress import progress_option
from fixedopt._entry.fit_keywords import jacobian
from fixedopt._entry.model import WithJacobian
from fixedopt._inputs import arrays, validate
from fixedopt._inputs.checks import INT32_MAX, boolean, integer, one_of, tolerance
from fixedopt._inputs.notices import caller_stacklevel, warn_if_float64_dropped
from fixedopt._numerics import backends
from fixedopt._objective.arguments import args_tuple, batched_args, check_solver, hashable_function
from fixedopt._objective.call_note import UserFunction
from fixedopt._objective.fit_data import fit_loss, row_data
from fixedopt._objective.losses import Loss
from fixedopt._objective.reparam import split_indices
from fixedopt._objective.vectorized import check_rows_independent
from fixedopt._solvers.lbfgs import LBFGS
from fixedopt._solvers.levenberg_marquardt import LevenbergMarquardt

STRATEGIES = ("mask", "split")
TOLERANCES = ("gtol", "ftol", "xtol", "abs_gtol")


class SolveOptions(TypedDict, total=False):
    """The keywords of ``minimize`` and ``least_squares`` (meanings: ``minimize``'s
    docstring; defaults: :data:`DEFAULTS`)."""

    fixed_values: Any
    bounds: Any
    solver: Solver[Any] | None
    args: tuple[Any, ...] | list[Any]
    batched: bool
    args_axes: Any
    strategy: str
    gtol: float | None
    ftol: float | None
    xtol: float | None
    abs_gtol: float
    max_steps: int
    differentiate: str | Differentiation
    lanes: int | None
    progress: bool | int | str
    vectorized: bool
    nan_unconverged: bool
    where: Any


DEFAULTS: dict[str, Any] = {
    "fixed_values": None, "bounds": None, "solver": None, "args": (), "batched": False,
    "args_axes": None, "strategy": "mask", "gtol": None, "ftol": None, "xtol": None,
    "abs_gtol": 0.0, "max_steps": 1000, "differentiate": "implicit", "lanes": None,
    "progress": False, "vectorized": False, "nan_unconverged": False,
    "where": None,
}  # fmt: skip

Entry = TypeVar("Entry", bound=Callable[..., Any])


def with_options(entry: Entry) -> Entry:
    """``entry`` (whose ``**options`` are :class:`SolveOptions`) with a signature that
    lists every keyword and its default, for ``help``, ``inspect`` and the docs."""
    signature = inspect.signature(entry)
    own = [p for p in signature.parameters.values() if p.kind != p.VAR_KEYWORD]
    annotations = SolveOptions.__annotations__  # ForwardRefs (postponed annotations)
    shared = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=DEFAULTS[name],
                          annotation=getattr(annotation, "__forward_arg__", annotation))
        for name, annotation in annotations.items()
    ]  # fmt: skip
    positional = [p for p in own if p.kind != p.KEYWORD_ONLY]
    keyword = [p for p in own if p.kind == p.KEYWORD_ONLY]
    entry.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*positional, *shared, *keyword]
    )
    return entry


def describe(
    fun: Callable[..., Any],
    x0: Any,
    fixed: Any,
    options: dict[str, Any],
    *,
    caller: str,
    loss: Loss | None = None,
    sigma: Any = None,
    counts: Any = None,
) -> tuple[Plan, Inputs]:
    """The :class:`Plan` and :class:`Inputs` of ``caller(fun, x0, fixed, **options)``
    (``caller``: ``"minimize"``, or ``"least_squares"`` with its ``loss`` and data).

    ``options`` is the entry point's own ``**options`` dict: it is completed with
    :data:`DEFAULTS` and its keywords replaced by their validated values in place, so
    that the call's keywords are one dict on the way to the plan and the inputs."""
    unknown = sorted(set(options) - set(DEFAULTS))
    if unknown:
        raise TypeError(f"{caller}() got an unexpected keyword argument {unknown[0]!r}")
    for name, default in DEFAULTS.items():
        options.setdefault(name, default)
    least_squares = caller == "least_squares"
    solver = options["solver"] or (LevenbergMarquardt() if least_squares else LBFGS())
    check_solver(solver, needs_residuals=least_squares, caller=caller)
    given = {"x0": x0} | {name: options[name] for name in ("fixed_values", "bounds", "args")}
    warn_if_float64_dropped(given | {"sigma": sigma, "counts": counts})
    _check_options(options, solver)
    fun = hashable_function(fun, "residual_fun" if least_squares else "fun")
    data = _inputs(x0, fixed, options, least_squares, sigma, counts)
    plan = _plan(fun, solver, least_squares, loss, options, data)
    _warn_if_sigma_ambiguous(plan, data, sigma)
    return plan, data


def _warn_if_sigma_ambiguous(plan: Plan, inputs: Inputs, sigma: Any) -> None:
    """A ``UserWarning`` where a 1-D ``sigma`` of a batch has the batch's length and so
    has one row's residuals: it is read as one value per row, which a ``sigma`` per
    residual shared by every row would be mistaken for (curve_fit reads it per point)."""
    if sigma is None or plan.batched_args is None or plan.vectorized or np.ndim(sigma) != 1:
        return
    batch = np.shape(sigma)[0]
    if batch != validate.batch_size(inputs.x0):
        return
    flags = iter(plan.batched_args)

    def row(a: Any) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(np.shape(a)[1:], jnp.result_type(a))

    args = jax.tree.map(lambda a: row(a) if next(flags) else a, inputs.args)
    try:
        out = jax.eval_shape(plan.fun, jax.tree.map(row, inputs.x0), *args)
    except Exception:  # the solve names the function's own error
        return
    if math.prod(np.shape(out)) == batch:
        warnings.warn(
            f"batched=True: `sigma` of shape ({batch},) is read as one standard deviation "
            f"per row (its axis is the batch axis), though each row also has {batch} "
            f"residuals. For one per residual shared by every row, pass "
            f"np.broadcast_to(sigma, ({batch}, {batch})); for one per row, shape "
            f"({batch}, 1) says so without this warning.",
            UserWarning,
            stacklevel=caller_stacklevel(),
        )


def _check_options(options: dict[str, Any], solver: Solver[Any]) -> None:
    """Each keyword of ``options`` that the plan or the inputs read as a Python value
    (``batched``, the tolerances, ``max_steps``, ``strategy``, ``differentiate``,
    ``lanes``, ``progress``) replaced by its validated value, in place; options that a
    solve would ignore, rejected."""
    checked = {name: tolerance(name, options[name]) for name in TOLERANCES}
    checked["batched"] = boolean("batched", options["batched"])
    checked["max_steps"] = integer("max_steps", options["max_steps"], maximum=INT32_MAX)
    options.update(checked)
    one_of("strategy", options["strategy"], STRATEGIES)
    differentiate = differentiation_option(options["differentiate"])
    options["lanes"] = _lanes(options, options["batched"], differentiate)
    if options["vectorized"] and getattr(solver, "scaling", None) == "hessian":
        raise ValueError(
            '`vectorized=True` cannot run LBFGS(scaling="hessian"): its Hessian-vector '
            "products at the start would send a batch of tangents through the "
            'objective\'s batching rule; use scaling="auto" or vectorized=False'
        )
    options["differentiate"] = differentiate
    options["progress"] = progress_option(options["progress"])


def _inputs(
    x0: Any, fixed: Any, options: dict[str, Any], least_squares: bool, sigma: Any, counts: Any
) -> Inputs:
    """The :class:`Inputs` of a call: its data checked and normalized (trees like
    ``x0``; ``sigma`` and ``counts`` with the batch axis in a batch)."""
    batched = options["batched"]
    args = args_tuple(options["args"])
    validate.check_params(x0, "x0")
    mask = validate.fixed_arrays(fixed, x0)
    values = options["fixed_values"]
    values = x0 if values is None else validate.normalize_values(values, x0)
    bounds = validate.normalize_bounds(options["bounds"], x0)
    validate.check_values_in_bounds(mask, values, bounds)
    if least_squares:  # minimize projects a start, as scipy's L-BFGS-B does
        validate.check_start_in_bounds(mask, x0, bounds, batched)
    batch = validate.batch_size(x0) if batched else None
    validate.check_has_entries(x0, batched)
    dtype = jnp.result_type(*jax.tree.leaves(x0))
    if sigma is not None:
        sigma = row_data("sigma", sigma, batch, dtype, positive=True)
    if counts is not None:
        counts = row_data("counts", counts, batch, dtype, positive=False)
    index = split_indices(mask, batched) if options["strategy"] == "split" else None
    tolerances = tuple(options[name] for name in TOLERANCES)
    stopping = stopping_rules(tolerances, options["max_steps"], dtype)
    return Inputs(x0, mask, values, bounds, args, sigma, counts, index, stopping)


def _plan(
    fun: Callable[..., Any],
    solver: Solver[Any],
    least_squares: bool,
    loss: Loss | None,
    options: dict[str, Any],
    inputs: Inputs,
) -> Plan:
    """The :class:`Plan` of a call whose ``options`` are checked (:func:`_check_options`),
    for the rows of ``inputs``: which ``args`` are per row, the lanes at most the batch,
    and ``fun`` wrapped to name the call in its errors' notes."""
    name = "residual_fun" if least_squares else "fun"
    lanes, per_row, batch = options["lanes"], None, None
    if options["batched"]:
        batch = validate.batch_size(inputs.x0)
        named = {"x0": inputs.x0, "sigma": inputs.sigma, "counts": inputs.counts}
        named = {key: value for key, value in named.items() if value is not None}
        per_row = batched_args(inputs.args, options["args_axes"], batch, named)
        lanes = None if lanes is None else min(lanes, batch)
    user_fun = UserFunction(fun, name, batch)
    if per_row is not None and options["vectorized"]:
        check_rows_independent(user_fun, inputs.x0, inputs.args, per_row)
    differentiate = options["differentiate"]
    return Plan(
        fun=user_fun,
        solver=solver,
        least_squares=least_squares,
        loss=loss,
        batched_args=per_row,
        lanes=lanes,
        backend=backends.platform(),
        vectorized=options["vectorized"],
        differentiate=differentiate,
        max_trips=differentiate.static_max_steps(options["max_steps"]),
        progress=options["progress"],
    )


def _lanes(options: dict[str, Any], batched: bool, differentiate: Differentiation) -> int | None:
    """``lanes``, validated; the options only a batch through lanes can use, checked."""
    lanes: int | None = options["lanes"]
    if lanes is not None:
        lanes = integer("lanes", lanes, minimum=1, expected="None or an int >= 1")
    vectorized = boolean("vectorized", options["vectorized"])
    set_ = {"args_axes": options["args_axes"] is not None, "lanes": lanes is not None,
            "progress": bool(options["progress"]), "vectorized": vectorized}  # fmt: skip
    _reject([name for name, on in set_.items() if on], batched, "without batched=True")
    through_lanes = [name for name in ("lanes", "progress", "vectorized") if set_[name]]
    unrolled = 'with differentiate="unroll" (fixed-length scans)'
    _reject(through_lanes, differentiate.through_lanes, unrolled)
    return lanes


def _reject(names: list[str], allowed: bool, why: str) -> None:
    """ValueError naming the options ``names`` unless they are ``allowed``."""
    if names and not allowed:
        given = ", ".join(f"`{name}`" for name in names)
        one = len(names) == 1
        has, it = ("has", "it") if one else ("have", "them")
        raise ValueError(f"{given} {has} no effect {why}: remove {it}")


def stopping_rules(tolerances: tuple[Any, ...], max_steps: int, dtype: Any) -> Stopping:
    """The traced stopping rules of the validated ``tolerances`` (:data:`TOLERANCES`),
    with defaults from ``dtype`` (that of ``x0``).

    ``gtol`` and ``xtol`` default to ``sqrt(eps)``: both tests are linear in the
    distance to the solution, so they ask for about half the digits of the dtype.
    ``ftol`` compares reductions of ``f``, quadratic in that distance: it defaults
    to ``eps`` (a reduction at the rounding level of ``f``), which asks for the
    same digits. (MINPACK's ``sqrt(eps)`` for ``ftol`` stops least-squares fits
    in float32 with 1-2 correct digits on ill-conditioned problems.)
    """
    eps = float(jnp.finfo(dtype).eps)
    precision = math.sqrt(eps)
    gtol, ftol, xtol, abs_gtol = (
        default if value is None else value
        for value, default in zip(tolerances, (precision, eps, precision, 0.0))
    )
    relative = (gtol, ftol, xtol)
    # The tests' tolerances (Stopping.strict, .loose): by NumPy where every rule is on
    # the host (the same bits as XLA's: a comparison, a maximum, a product), so that no
    # program derives them (each would be a kernel of its own); else by jax.numpy.
    on_device = any(isinstance(tol, (jax.Array, jax.core.Tracer)) for tol in relative)
    xp: Any = jnp if on_device else np

    def tested(tol: Any) -> jax.Array:  # NaN where the test is off
        tol = xp.asarray(tol, dtype)
        return arrays.asarray(xp.where(tol > 0, tol, xp.asarray(np.nan, dtype)), dtype)

    floor = xp.asarray(precision, dtype)
    return Stopping(
        abs_gtol=arrays.asarray(abs_gtol, dtype),
        max_steps=arrays.asarray(max_steps, jnp.int32),
        precision=arrays.asarray(floor, dtype),
        strict=Tolerances(*map(tested, relative)),
        loose=Tolerances(*(tested(xp.maximum(xp.asarray(tol, dtype), floor)) for tol in relative)),
        precision_squared=arrays.asarray(floor * floor, dtype),
    )


def least_squares_data(
    residual_fun: Callable[..., Any],
    x0: Any,
    options: dict[str, Any],
    *,
    estimator: str,
    loss: Any,
    f_scale: float,
    sigma: Any,
    counts: Any,
    max_nfev: int | None,
    x_scale: str | None,
    jac: Any,
) -> tuple[Callable[..., Any], Loss | None, dict[str, Any]]:
    """``least_squares``'s own keywords read: ``residual_fun`` with scipy's ``jac``
    (if given), the fit's :class:`Loss` (None: plain least squares), and ``options``
    (the entry point's own dict) with scipy's ``max_nfev`` as ``max_steps``, set in
    place; ``x_scale`` checked."""
    residual_fun = hashable_function(residual_fun, "residual_fun")
    if not (x_scale is None or (isinstance(x_scale, str) and x_scale == "jac")):
        raise ValueError(
            f"`x_scale` must be 'jac' (or None), got {x_scale!r}: Levenberg-Marquardt scales "
            "the parameters by the Jacobian's column norms (scipy's x_scale='jac')"
        )
    if max_nfev is not None:
        if "max_steps" in options:  # given, even at its default: one would be dropped
            raise ValueError("give one of `max_steps` and `max_nfev` (the same limit)")
        options["max_steps"] = max_nfev
    residual_fun = _with_jac(residual_fun, jac, x0)
    return residual_fun, fit_loss(estimator, loss, f_scale, sigma, counts), options


def _with_jac(fun: Callable[..., Any], jac: Any, x0: Any) -> Callable[..., Any]:
    """``fun`` with the Jacobian ``jac`` (scipy's ``jac``), or ``fun``."""
    jac = jacobian(jac, "trf")
    if jac is None:
        return fun
    if not (hasattr(x0, "shape") and len(x0.shape) in (1, 2)):
        raise TypeError("`jac` needs `x0` to be one array (n,) per row, not a tree")
    return WithJacobian(fun, hashable_function(jac, "jac"))
