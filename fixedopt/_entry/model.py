"""``curve_fit``'s model ``f(x, *params)``: its parameter count (scipy reads it from
the signature), the residuals built from it, and the checks of its output against
the data, made at trace time with a message per mistake."""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._inputs.validate import PyTree
from fixedopt._objective.host_callback import TRACING_ERRORS


def function_name(f: Callable[..., Any]) -> str:
    inner = getattr(f, "fun", f)  # fixedopt's wrapper of an unhashable callable
    return str(getattr(inner, "__qualname__", None) or type(inner).__name__)


def parameter_count(f: Callable[..., Any]) -> int:
    """The number of parameters of ``f(x, p1, ..., pk)``: its positional parameters
    after the first, as scipy counts them when ``p0`` is None."""
    try:
        parameters = inspect.signature(f).parameters.values()
    except (TypeError, ValueError):
        parameters = None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if parameters is None or any(p.kind == p.VAR_POSITIONAL for p in parameters):
        count = 0
    else:
        count = sum(p.kind in positional for p in parameters) - 1
    if count < 1:
        raise ValueError(
            "Unable to determine number of fit parameters. `f` must be f(x, p1, ..., pk) "
            "with k >= 1 named parameters after x, or give `p0` (its length is k)."
        )
    return count


@dataclasses.dataclass(frozen=True)
class CurveFunction:
    """``f(x, *p)`` as an array; with ``jac`` (``jac(x, *p) -> (m, k)``), its
    derivative in ``p`` is ``jac``'s (its derivative in ``x`` stays JAX's). An error
    of JAX's tracing inside ``f`` (a NumPy call, a Python ``if`` on a parameter, state
    kept between calls) becomes a ``TypeError`` that names ``f`` and the fix."""

    f: Callable[..., Any]
    jac: Callable[..., Any] | None = None

    def __call__(self, x: PyTree, p: jax.Array) -> jax.Array:
        try:
            if self.jac is None:
                return jnp.asarray(self.f(x, *p))
            per = ("data point", "parameter")
            return _with_jacobian(lambda p, x: self.f(x, *p), self._jac_at, p, x, per)
        except TRACING_ERRORS as error:
            raise TypeError(_not_traceable(self.f, x, p, error)) from error

    def _jac_at(self, p: jax.Array, x: PyTree) -> Any:
        """``jac(x, *p)``; an error of JAX's tracing in it named as ``jac``'s."""
        assert self.jac is not None
        try:
            return self.jac(x, *p)
        except TRACING_ERRORS as error:
            message = _not_traceable(self.jac, x, p, error).replace("`f`", "`jac`")
            raise TypeError(message) from error


def called(f: Callable[..., Any], how: str, k: int) -> str:
    """How fixedopt called ``f``, for a message."""
    name = function_name(f)
    return f"fixedopt called `f` ({name}) as f(xdata, *p) with {how} and k = {k} parameters"


def _not_traceable(f: Callable[..., Any], x: PyTree, p: jax.Array, error: Exception) -> str:
    shapes = [tuple(np.shape(leaf)) for leaf in jax.tree.leaves(x)]
    how = f"xdata of shape {shapes[0] if len(shapes) == 1 else shapes}"
    first = str(error).strip().splitlines()[0].rstrip(".")
    return (
        f"{called(f, how, p.shape[-1])}; JAX could not trace `f`: {type(error).__name__}: "
        f"{first}. fixedopt runs `f` on JAX tracers, once per compilation, not on NumPy "
        "arrays per evaluation: write `f` with jax.numpy (import jax.numpy as jnp; jnp.exp, "
        "not np.exp), with jnp.where instead of a Python `if` on a parameter, and keep no "
        "state between calls"
    )


def _with_jacobian(
    fun: Callable[[jax.Array, Any], Any],
    jac: Callable[[jax.Array, Any], Any],
    wrt: jax.Array,
    rest: Any,
    per: tuple[str, str],
) -> jax.Array:
    """``fun(wrt, rest)`` as an array whose derivative in ``wrt`` (a 1-D array) is
    ``jac(wrt, rest) -> (m, n)``; its derivative in ``rest`` stays JAX's. ``per``
    names a row and a column of ``jac``'s matrix for the message of a wrong shape."""

    def plain(wrt: jax.Array, rest: Any) -> jax.Array:
        return jnp.asarray(fun(wrt, rest))

    value = jax.custom_jvp(plain)

    @value.defjvp
    def rule(primals: Any, tangents: Any) -> tuple[jax.Array, jax.Array]:
        (wrt, rest), (d_wrt, d_rest) = primals, tangents
        out, from_rest = jax.jvp(lambda rest: plain(wrt, rest), (rest,), (d_rest,))
        matrix = jnp.asarray(jac(wrt, rest), out.dtype)
        if matrix.size != out.size * wrt.size:
            raise ValueError(
                f"`jac` must return one row per {per[0]} and one column per {per[1]}, "
                f"shape {(out.size, wrt.size)}, got shape {tuple(matrix.shape)}"
            )
        return out, from_rest + matrix.reshape((*out.shape, wrt.size)) @ jnp.ravel(d_wrt)

    out: jax.Array = value(wrt, rest)
    return out


def output_shape(
    model: CurveFunction,
    x: PyTree,
    p: jax.Array | jax.ShapeDtypeStruct,
    y_shape: tuple[int, ...],
    how: str,
) -> tuple[int, ...]:
    """The shape of ``f(x, *p)``, checked against one fit's data ``y_shape``: a
    ``TypeError`` or ``ValueError`` that names the mistake (``how``: how ``x`` was
    read, for the message)."""
    f, k = model.f, p.shape[-1]
    message = called(f, how, k)
    try:
        inspect.signature(f).bind(x, *range(k))
    except TypeError as error:
        raise TypeError(
            f"{message}, but `f` cannot take them: {error}. `p0` (or the parameters after x "
            "in `f`'s signature, when p0 is None) gives k: make the two agree"
        ) from None
    except ValueError:  # no signature to read (a builtin): let the call decide
        pass
    try:
        out = jax.eval_shape(model, x, p)
    except TypeError as error:
        if not isinstance(error.__cause__, TRACING_ERRORS):
            raise
        # Raised again out here, so that JAX's note on its own frames does not follow it.
        message = str(error).split("\n--------------------")[0]
        raise TypeError(message) from error.__cause__
    shape = tuple(out.shape)
    problem = shape_mistake(shape, y_shape)
    if problem:
        raise ValueError(f"{message}: {problem}")
    return shape


def shape_mistake(shape: tuple[int, ...], y_shape: tuple[int, ...]) -> str | None:
    """What is wrong with a model output of ``shape`` for data of ``y_shape``, or
    None (a scalar ``ydata`` is broadcast to the output, as in scipy)."""
    if shape == y_shape or y_shape == ():
        return None
    got = f"`f` returned shape {shape} for `ydata` of shape {y_shape}"
    if shape == ():
        return (
            f"{got}: a scalar where one model value per data point is due. Return the curve "
            "at every x (a sum or a mean over x reduces it to one number)"
        )
    size, expected = math.prod(shape), math.prod(y_shape)
    try:
        broadcast = np.broadcast_shapes(shape, y_shape)
    except ValueError:
        broadcast = None
    if size == expected:
        return (
            f"{got}: the same {size} values in another shape (a column (m, 1) against a row "
            f"(m,) would broadcast f - ydata to {broadcast}); reshape the output to "
            f"{y_shape} (e.g. `.ravel()` or `[:, 0]`)"
        )
    if broadcast is not None and broadcast != y_shape:
        return (
            f"{got}: f - ydata would broadcast to {broadcast}, {math.prod(broadcast)} "
            f"residuals for {expected} data points: an accidental broadcast (an axis "
            "added to x or to a parameter?); return one value per data point"
        )
    return (
        f"{got}: {size} model values for {expected} data points (a slice or np.diff "
        "shortens the curve by one; a grid other than xdata gives another length); return "
        "one value per data point"
    )


@dataclasses.dataclass(frozen=True)
class WithJacobian:
    """``residual_fun(x, *args)`` whose derivative in ``x`` (a 1-D array) is
    ``jac(x, *args) -> (m, n)``, scipy's ``least_squares(jac=callable)``; its
    derivative in ``args`` stays JAX's."""

    fun: Callable[..., Any]
    jac: Callable[..., Any]

    def __call__(self, x: jax.Array, *args: Any) -> jax.Array:
        fun, jac = self.fun, self.jac
        per = ("residual", "entry of x")
        return _with_jacobian(
            lambda x, args: fun(x, *args), lambda x, args: jac(x, *args), x, args, per
        )
