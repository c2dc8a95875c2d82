"""``Model``: a ``jax.numpy`` function of ``x`` and named parameters, as lmfit's, with
prefixes, composition by ``+ - * /``, ``make_params``, ``eval`` and
``eval_components``; ``fit`` runs a batch of fits (``fixedopt._models.fit``)."""

from __future__ import annotations

import functools
import inspect
import operator
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._models.host import host_call, host_curve
from fixedopt._models.layout import Layout, arrays, layout
from fixedopt._models.parameters import Parameters
from fixedopt._numerics.program_names import defined_here, name_of

Curve = Callable[..., Any]
OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def _signature(
    func: Curve, independent_vars: tuple[str, ...] | None
) -> tuple[tuple[str, ...], dict[str, float | None], dict[str, Any]]:
    """The independent variables, the parameters (name -> default) and the options
    (keywords with a non-numeric default, as ``form="linear"``) of ``func``."""
    parameters = list(inspect.signature(func).parameters.values())
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if not positional:
        raise ValueError(f"`func` {func!r} must take the independent variable first")
    independent = independent_vars or (positional[0].name,)
    names: dict[str, float | None] = {}
    options: dict[str, Any] = {}
    for p in parameters:
        if p.name in independent or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        numeric = p.default is p.empty or p.default is None or isinstance(p.default, int | float)
        if numeric and not isinstance(p.default, bool):
            names[p.name] = p.default if isinstance(p.default, int | float) else None
        else:
            options[p.name] = p.default
    return tuple(independent), names, options


def with_parameters(
    curve: Callable[..., Any],
    independent: tuple[str, ...],
    names: list[str],
    default: Any = inspect.Parameter.empty,
) -> Callable[..., Any]:
    """``curve`` (taking the independent variables by position and the parameters by
    keyword) with the signature a :class:`Model` reads: ``independent`` first, then the
    keywords ``names`` (each with ``default``), for a curve whose parameters are known
    only when it is made (a polynomial's degree, a spline's knots, an expression)."""
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [inspect.Parameter(name, positional) for name in independent]
    parameters += [inspect.Parameter(name, keyword, default=default) for name in names]
    curve.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    return curve


class Model:
    """lmfit's ``Model``: ``func(x, param1, param2, ...)`` with named parameters.

    ``func`` is written for ONE fit (scalar parameters), with ``jax.numpy`` (traced and
    compiled, exact derivatives) or NumPy (run on the host, derivatives by finite
    differences: ``fixedopt.HostFunctionWarning``); its
    parameter names are those of its signature after the independent variable (the
    first argument, or ``independent_vars``), each prefixed with ``prefix``. Keywords
    with a non-numeric default (as ``form="erf"``) are options, fixed when the model
    is made (``Model(step, form="erf")``).

    Example:
      >>> import jax.numpy as jnp
      >>> from fixedopt.models import Model
      >>> def decay(t, amplitude=1.0, rate=1.0):
      ...     return amplitude * jnp.exp(-rate * t)
      >>> model = Model(decay, prefix="d_")
      >>> model.param_names
      ('d_amplitude', 'd_rate')
      >>> curve = model.eval(model.make_params(d_amplitude=2.0), t=jnp.array([0.0, 1.0]))
      >>> print(curve.round(6))
      [2.       0.735759]
    """

    def __init__(
        self,
        func: Curve,
        prefix: str = "",
        *,
        independent_vars: Any = None,
        param_names: Any = None,
        name: str | None = None,
        **options: Any,
    ) -> None:
        self.func, self.prefix = func, prefix
        independent, defaults, found = _signature(func, tuple(independent_vars or ()) or None)
        if param_names is not None:
            defaults = {n: defaults.get(n) for n in param_names}
        unknown = sorted(set(options) - set(found))
        if unknown:
            name = getattr(func, "__name__", "func")
            raise TypeError(f"unknown options {unknown} of {name}; it takes {sorted(found)}")
        self.independent_vars = independent
        self.options = {**found, **options}
        self.defaults = {prefix + n: v for n, v in defaults.items()}
        self._names = tuple(defaults)
        self.hints: dict[str, dict[str, Any]] = {}
        self.name: str = str(name or getattr(func, "__name__", "model"))

    def __repr__(self) -> str:
        prefix = f", prefix='{self.prefix}'" if self.prefix else ""
        return f"Model({self.name}{prefix})"

    def _identity(self) -> Any:
        """What the model's curve depends on: its class, function, prefix, names,
        independent variables and options (not its hints, which only
        ``make_params`` reads). Two models made alike are equal, so that a model made
        again (a notebook cell run again) finds the programs compiled for the first:
        its fit compiles nothing new (it compiled all again, 5.9 s, issue 64). Options
        that cannot be hashed make the model equal to itself only."""
        options = tuple(sorted(self.options.items()))
        key = (type(self), self.func, self.prefix, self._names, self.independent_vars, options)
        try:
            hash(key)
        except TypeError:
            return id(self)
        return key

    def __eq__(self, other: object) -> bool:
        return self is other or (
            isinstance(other, Model) and type(other) is type(self)
            and self._identity() == other._identity()
        )  # fmt: skip

    def __hash__(self) -> int:
        return hash(self._identity())

    def program_name(self) -> str | None:
        """Text naming this model's curve before a trace, for a program stored beside
        the persistent cache (:mod:`fixedopt._numerics.program_names`): fixedopt's own
        class and function, then what :meth:`_identity` holds; None for a function of
        the user's, or one made in a function (a polynomial's, an expression's)."""
        kind = type(self)
        if not (defined_here(kind) and defined_here(self.func)):
            return None
        func = f"{self.func.__module__}.{self.func.__qualname__}"
        options = tuple(sorted(self.options.items()))
        fields = (func, self.prefix, self._names, self.independent_vars, options)
        named = name_of(fields)
        return None if named is None else f"{kind.__module__}.{kind.__qualname__}{named}"

    @property
    def param_names(self) -> tuple[str, ...]:
        """The parameters the function takes (prefixed), in its order."""
        return tuple(self.prefix + n for n in self._names)

    @property
    def components(self) -> tuple[Model, ...]:
        """The models this one is made of, in order (itself, for a plain model)."""
        return (self,)

    def set_param_hint(self, name: str, **hint: Any) -> None:
        """Defaults for ``make_params``: ``value``, ``vary``, ``min``, ``max``, ``expr``
        (``{prefix}`` in an ``expr`` is this model's prefix). A hint for a name the
        function does not take adds a derived parameter (as lmfit's ``fwhm``)."""
        self.hints.setdefault(self.prefix + name, {}).update(hint)

    def curve(self, values: Mapping[str, Any], independent: Mapping[str, Any]) -> jax.Array:
        """The model for ONE fit: ``values`` maps each parameter name to its value."""
        inputs = [independent[v] for v in self.independent_vars]
        given = {n: values[self.prefix + n] for n in self._names}
        if not hasattr(self, "_host"):  # decided at the first trace: JAX's or the host's
            self._host = host_call(self.func, self._names, self.options, inputs, given)
        if self._host is not None:
            return host_curve(self._host, inputs, given)
        out: jax.Array = jnp.asarray(self.func(*inputs, **given, **self.options))
        return out

    def make_params(self, **values: Any) -> Parameters:
        """:class:`Parameters` for this model: each parameter's value from ``values`` (a
        number, or a dict of ``value``/``vary``/``min``/``max``/``expr``), else its hint,
        else the function's default (else 0), as lmfit's ``make_params``."""
        known = {n for model in self.components for n in (*model.param_names, *model.hints)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise TypeError(
                f"make_params() got unknown parameter names {unknown}: this model's "
                f"parameters are {sorted(known)}"
            )
        params = Parameters()
        for model in self.components:
            for name in (*model.param_names, *model.hints):
                hint = {"value": model.defaults.get(name)} | model.hints.get(name, {})
                if isinstance(hint.get("expr"), str):
                    hint["expr"] = hint["expr"].format(prefix=model.prefix)
                hint["value"] = 0.0 if hint.get("value") is None else hint["value"]
                given = values.get(name)
                if isinstance(given, dict):
                    hint |= given
                elif given is not None:
                    hint["value"] = given
                params.add(name, **hint)
        return params

    def guess(self, data: Any, x: Any, **values: Any) -> Parameters:
        """Start values estimated from ``data`` (``(m,)`` or ``(B, m)``): only the
        built-in models can (lmfit's ``guess``)."""
        raise NotImplementedError(f"{self!r} has no guess; use make_params")

    def eval(self, params: Parameters | None = None, **kwargs: Any) -> jax.Array:
        """The model at ``params`` (and any parameter values given by keyword) and the
        independent variables given by keyword: ``(m,)``, or ``(B, m)`` for a batch."""
        out: jax.Array = _evaluate(self, params, kwargs, _curve)
        return out

    def eval_components(
        self, params: Parameters | None = None, **kwargs: Any
    ) -> dict[str, jax.Array]:
        """Each component's curve, keyed by its prefix (else its name), as lmfit's."""
        out: dict[str, jax.Array] = _evaluate(self, params, kwargs, _parts)
        return {key: out[key] for key in (c.prefix or c.name for c in self.components)}

    def fit(self, data: Any, params: Parameters | None = None, *, weights: Any = None,
            **kwargs: Any) -> Any:  # fmt: skip
        """Fit the model to each row of ``data``; see :func:`fixedopt.models.fit`."""
        from fixedopt._models.fit import fit

        return fit(self, data, params, weights=weights, **kwargs)

    def fit_xarray(self, data: Any, params: Parameters | None = None, *, dim: str,
                   weights: Any = None, **kwargs: Any) -> Any:  # fmt: skip
        """Fit along ``dim`` of an ``xarray.DataArray`` at every index of its other
        dimensions; see :func:`fixedopt.models.fit_xarray`."""
        from fixedopt._models.maps import fit_xarray

        return fit_xarray(self, data, params, dim=dim, weights=weights, **kwargs)

    def _combine(self, other: Model, op: str) -> CompositeModel:
        if not isinstance(other, Model):
            raise TypeError(f"a Model combines with a Model, got {type(other).__name__}")
        return CompositeModel(self, other, op)

    def __add__(self, other: Model) -> CompositeModel:
        return self._combine(other, "+")

    def __sub__(self, other: Model) -> CompositeModel:
        return self._combine(other, "-")

    def __mul__(self, other: Model) -> CompositeModel:
        return self._combine(other, "*")

    def __truediv__(self, other: Model) -> CompositeModel:
        return self._combine(other, "/")


class CompositeModel(Model):
    """Two models combined by ``+``, ``-``, ``*`` or ``/`` (lmfit's ``CompositeModel``)."""

    def __init__(self, left: Model, right: Model, op: str) -> None:
        clash = sorted(set(left.param_names) & set(right.param_names))
        if clash:
            raise ValueError(f"{left!r} {op} {right!r}: both have parameters {clash}; use a prefix")
        self.left, self.right, self.op = left, right, op
        self.independent_vars = tuple(dict.fromkeys(left.independent_vars + right.independent_vars))
        self.prefix, self.options, self.hints = "", {}, {}
        self.defaults = {**left.defaults, **right.defaults}
        self.name = f"{left!r} {op} {right!r}"

    def __repr__(self) -> str:
        return f"({self.name})"

    def _identity(self) -> Any:
        """Equal where both operands and the operator are (see :meth:`Model._identity`)."""
        return (type(self), self.left, self.right, self.op)

    def program_name(self) -> str | None:
        """Both operands' names and the operator (see :meth:`Model.program_name`)."""
        named = name_of((self.left, self.op, self.right))
        return None if named is None or type(self) is not CompositeModel else f"composite{named}"

    @property
    def param_names(self) -> tuple[str, ...]:
        """The parameters of both operands, the left's first."""
        return self.left.param_names + self.right.param_names

    @property
    def components(self) -> tuple[Model, ...]:
        """The plain models of both operands, in order."""
        return self.left.components + self.right.components

    def curve(self, values: Mapping[str, Any], independent: Mapping[str, Any]) -> jax.Array:
        left = self.left.curve(values, independent)
        out: jax.Array = OPERATORS[self.op](left, self.right.curve(values, independent))
        return out


def _curve(model: Model, values: Mapping[str, Any], independent: Mapping[str, Any]) -> Any:
    return model.curve(values, independent)


def _parts(model: Model, values: Mapping[str, Any], independent: Mapping[str, Any]) -> Any:
    return {c.prefix or c.name: c.curve(values, independent) for c in model.components}


def _evaluate(model: Model, params: Parameters | None, kwargs: dict[str, Any], what: Any) -> Any:
    """``what(model, values, independent)`` for one fit, or for each row of a batch."""
    independent = {v: jnp.asarray(kwargs.pop(v)) for v in model.independent_vars if v in kwargs}
    missing = [v for v in model.independent_vars if v not in independent]
    if missing:
        raise TypeError(f"{model!r}.eval needs the independent variables {missing} by keyword")
    params = (params or model.make_params()).copy()
    for name in [name for name in params if name in kwargs]:  # as lmfit: a value given
        params[name].set(value=kwargs[name], expr="")  # by keyword overrides a tie
    rows = params.rows()
    plan = layout(params, rows or 1)
    arr = arrays(params, plan, rows or 1, jnp.result_type(float))
    codes = arr.codes if arr.codes is not None else np.zeros((rows or 1, 0), np.int32)
    out = _rows(model, plan, what, jnp.asarray(arr.p0), jnp.asarray(codes), independent)
    return out if rows else jax.tree.map(operator.itemgetter(0), out)


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _rows(model: Model, plan: Layout, what: Any, p: jax.Array, codes: jax.Array,
          independent: dict[str, jax.Array]) -> Any:  # fmt: skip
    """``what`` for each row: one compiled program per model, layout and shapes."""

    def one(p: jax.Array, codes: jax.Array) -> Any:
        return what(model, plan.values(p, codes), independent)

    return jax.vmap(one)(p, codes)
