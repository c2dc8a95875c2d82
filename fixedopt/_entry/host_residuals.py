"""``least_squares``' ``residual_fun`` (and ``jac``), or ``minimize``'s scalar ``fun``,
when JAX cannot trace them: run on the host (:mod:`fixedopt._objective.host_callback`),
as in ``curve_fit`` (:mod:`fixedopt._entry.host_model`), for ``x0`` of one array per
problem, ``(n,)`` (``(B, n)`` batched): derivatives by scipy's finite differences
(``jac`` one of ``'2-point'``, ``'3-point'``, ``'cs'``; ``'2-point'`` when None, as
scipy's ``least_squares`` and ``minimize``) or the user's ``jac``, called on the host
too (``least_squares`` only)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from fixedopt._objective.differences import SCHEMES
from fixedopt._objective.host_callback import (
    HostCall,
    remember_traced,
    shared_bounds,
    structure,
    traced_before,
    tracing_error,
    warn_on_host,
)


@dataclasses.dataclass(frozen=True)
class _Residuals:
    """``fun(x, *args)`` as ``fun(args, x)``: the host call's order."""

    fun: Callable[..., Any]

    def __call__(self, args: tuple[Any, ...], x: np.ndarray) -> Any:
        return self.fun(x, *args)


@dataclasses.dataclass(frozen=True)
class HostResiduals:
    """``residual_fun(x, *args)`` run on the host: ``call(args, x)``."""

    call: HostCall

    def __call__(self, x: jax.Array, *args: Any) -> jax.Array:
        return self.call(args, x)


def runnable_residuals(
    fun: Callable[..., Any], jac: Any, x0: Any, options: dict[str, Any],
    name: str = "residual_fun",
) -> tuple[Callable[..., Any], Any]:  # fmt: skip
    """``(fun, jac)``: as given if JAX traces them (or ``x0`` is not one array per
    problem, or ``vectorized=True``), else ``fun`` on the host with ``jac`` folded in
    (then None). ``name``: the argument's name in the warning (``"fun"`` for
    ``minimize``'s scalar objective, whose gradient is then the ``(1, n)`` Jacobian)."""
    probe = _probe(x0, options)
    if probe is None:
        return fun, jac
    x, args = probe
    user_jac = jac if callable(jac) else None
    key: Any = (fun, user_jac, structure(x), structure(args))
    try:
        if traced_before(key):
            return fun, jac
    except TypeError:  # an unhashable function: tried at every call
        key = None
    calls = [(lambda x, args: fun(x, *args), (x, args))]
    if user_jac is not None:
        calls.append((lambda x, args: user_jac(x, *args), (x, args)))
    try:
        error = tracing_error(calls, [fun, user_jac])
    except Exception:  # not a tracing error: the solve names it
        return fun, jac
    if error is None:
        if key is not None:
            remember_traced(key)
        return fun, jac
    scheme = jac if isinstance(jac, str) and jac in SCHEMES else "2-point"
    warn_on_host(fun, name, error, None if user_jac is not None else scheme)
    host_jac = _Residuals(user_jac) if user_jac is not None else None
    bounds = shared_bounds(options.get("bounds"), x.size)
    call = HostCall(_Residuals(fun), host_jac, scheme, bounds, ((args, x),))
    return HostResiduals(call), None


def runnable_objective(
    fun: Callable[..., Any], jac: Any, x0: Any, options: dict[str, Any]
) -> Callable[..., Any]:
    """``minimize``'s ``fun``, on the host if JAX cannot trace it, its gradient by
    ``jac``'s finite differences (:func:`runnable_residuals`); ``jac`` checked: None
    or a scheme of :data:`~fixedopt._objective.differences.SCHEMES`."""
    if jac is not None and not (isinstance(jac, str) and jac in SCHEMES):
        raise ValueError(
            f"`jac` must be None or one of {SCHEMES} (the finite differences of a `fun` "
            f"run on the host; a `fun` JAX traces has JAX's exact gradient), got {jac!r}"
        )
    runnable, _ = runnable_residuals(fun, jac, x0, options, name="fun")
    return runnable


def _probe(x0: Any, options: dict[str, Any]) -> tuple[np.ndarray, tuple[Any, ...]] | None:
    """One problem's ``x0`` and ``args`` as NumPy arrays (the first row's of a batch
    whose ``args_axes`` are the default or 0), or None where the host path does not
    apply."""
    if options.get("vectorized") or isinstance(x0, (dict, list, tuple)):
        return None
    batched = bool(options.get("batched", False))
    try:
        x = np.asarray(x0)
        args = tuple(jax.tree.map(np.asarray, tuple(options.get("args", ()))))
    except (TypeError, ValueError):
        return None
    if x.ndim != (2 if batched else 1) or not np.issubdtype(x.dtype, np.floating):
        return None
    if batched and x.shape[0] == 0:  # an empty batch: no row to try the function on
        return None
    if batched:
        axes = options.get("args_axes")
        if axes not in (None, 0):
            return None
        x = x[0]
        args = jax.tree.map(lambda a: a[0] if a.ndim else a, args)
    return x, args
