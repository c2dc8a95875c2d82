"""``curve_fit``'s model when JAX cannot trace it (a NumPy ``f`` or ``jac``, a Python
``if`` on a parameter, state kept between calls): the same :class:`CurveFunction`, run on
the host (:mod:`fixedopt._objective.host_callback`), with one warning.

A call valid for scipy then runs as scipy runs it: ``f(x, *p)`` with ``p`` NumPy
floats, the user's ``jac`` or scipy's finite differences for the derivatives (in
``pcov`` too), a first call at ``p0``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from fixedopt._entry.fit_keywords import feasible_start
from fixedopt._entry.model import CurveFunction, parameter_count
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
class _Unpacked:
    """``f(x, *p)`` as ``f(x, p)`` (``p`` a 1-D array): scipy's call of a model."""

    f: Callable[..., Any]

    def __call__(self, x: Any, p: np.ndarray) -> Any:
        return self.f(x, *p)


@dataclasses.dataclass(frozen=True)
class HostModel(CurveFunction):
    """A :class:`CurveFunction` whose ``f`` (and ``jac``) run on the host: ``call``."""

    call: HostCall | None = None

    def __call__(self, x: Any, p: jax.Array) -> jax.Array:
        assert self.call is not None
        return self.call(x, p)


def runnable(
    model: CurveFunction, scheme: str, xdata: Any, p0: Any, limits: Any, batched: bool
) -> CurveFunction:
    """``model`` if JAX traces it, else the same model on the host (warned once).

    ``scheme``: the finite differences where ``model`` has no ``jac``; ``xdata``,
    ``p0`` and ``limits`` as ``curve_fit`` received them (read here only to try
    ``f``: their errors are ``prepared``'s to raise).
    """
    readings, p = _trial_inputs(model.f, xdata, p0, limits, batched)
    if p is None or not readings:
        return model
    key = (model, tuple(structure(x) for x in readings), structure(p))
    if traced_before(key):
        return model
    f_error = _error(CurveFunction(model.f), readings, p)
    error = f_error or (_error(model, readings, p) if model.jac is not None else None)
    if error is None:
        remember_traced(key)
        return model
    jac = _Unpacked(model.jac) if model.jac is not None else None
    name = "f" if f_error is not None else "jac"
    fun = model.f if f_error is not None or model.jac is None else model.jac
    warn_on_host(fun, name, error, None if jac is not None else scheme)
    probes = tuple((x, p) for x in readings)
    call = HostCall(_Unpacked(model.f), jac, scheme, shared_bounds(limits, p.size), probes)
    return HostModel(model.f, model.jac, call)


def _error(model: CurveFunction, readings: list[Any], p: np.ndarray) -> Exception | None:
    """The tracing error of ``f`` (and ``jac``) under the first reading of ``xdata``
    that they take; None if one traces (other errors are left to the shape checks)."""
    found = None
    for x in readings:
        calls = [(lambda x, p: model.f(x, *p), (x, p))]
        if model.jac is not None:
            calls.append((lambda x, p: model.jac(x, *p), (x, p)))  # type: ignore[misc]
        try:
            error = tracing_error(calls, [model.f, model.jac])
        except Exception:
            continue
        if error is None:
            return None
        found = found or error
    return found


def _trial_inputs(
    f: Callable[..., Any], xdata: Any, p0: Any, limits: Any, batched: bool
) -> tuple[list[Any], np.ndarray | None]:
    """The readings of ``xdata`` (shared; one fit's with ``batched``) as NumPy
    arrays, and one fit's start: ``p0``'s, or scipy's when it is None."""
    try:
        x = _host_tree(xdata)
        if p0 is None:
            k = parameter_count(f)
            start = np.ones(k)
            if limits is not None:
                lower, upper = (np.broadcast_to(np.asarray(b, float), (k,)) for b in limits)
                start = feasible_start(lower, upper)
        else:
            start = np.asarray(p0)
            start = start[None] if start.ndim == 0 else start
            start = start[0] if batched and start.ndim == 2 else start
        if not np.issubdtype(start.dtype, np.floating):
            start = start.astype(jax.dtypes.canonicalize_dtype(np.float64))
    except (TypeError, ValueError):
        return [], None
    readings = [x]
    leaves = jax.tree.leaves(x)
    if batched and leaves and all(np.ndim(leaf) >= 1 for leaf in leaves):
        readings.append(jax.tree.map(lambda leaf: leaf[0], x))
    return readings, start


def _host_tree(xdata: Any) -> Any:
    """``xdata`` as NumPy arrays (a list of numbers is one array, as NumPy reads it)."""
    if isinstance(xdata, (list, tuple)):
        try:
            return np.asarray(xdata)
        except (TypeError, ValueError):
            pass
    return jax.tree.map(np.asarray, xdata)
