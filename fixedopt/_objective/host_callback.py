"""Functions JAX cannot trace, run on the host: a model or Jacobian written with
NumPy (``np.exp``, ``np.vstack``), with a Python ``if`` on a parameter's value, or
with state kept between calls, as a scipy script writes them.

:func:`tracing_error` tries a function on JAX tracers (twice: state kept from one
call to the next shows on the second) and puts back the attributes the trial set on
it. :class:`HostCall` then calls the function through ``jax.pure_callback``, one
Python call per problem and evaluation, over a whole batch in one host call
(``vmap_method="expand_dims"``), with its derivative in the parameters from the
user's own ``jac`` (also called on the host) or from scipy's finite differences
(``'2-point'``, ``'3-point'``, ``'cs'``: :mod:`fixedopt._objective.differences`).
A call repeated with the same arguments is answered from the last one (scipy's
gh-13670: a function is never called twice running at the same point). The
derivative in anything but the parameters (``xdata``, ``args``) is not available on
the host: asking for it raises JAX's error for ``pure_callback``.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from fixedopt._objective.differences import SCHEMES, finite_differences

TRACING_ERRORS = (
    jax.errors.TracerArrayConversionError,
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerBoolConversionError,
    jax.errors.TracerIntegerConversionError,
    jax.errors.UnexpectedTracerError,
)


class HostFunctionWarning(UserWarning):
    """A function JAX cannot trace runs on the host (``jax.pure_callback``): one
    Python call per problem and evaluation, derivatives by finite differences.
    Written with ``jax.numpy`` it runs compiled, with exact derivatives."""


def tracing_error(
    calls: Sequence[tuple[Callable[..., Any], tuple[Any, ...]]], owners: Sequence[Any]
) -> Exception | None:
    """The error JAX's tracing met in any ``fun(*args)`` of ``calls`` (each traced
    under ``jax.eval_shape`` twice), or None; the attributes of ``owners`` (the
    user's functions) are put back as they were before, so that a trial leaves no
    tracer in their state."""
    saved = [dict(vars(owner)) if hasattr(owner, "__dict__") else None for owner in owners]
    try:
        for _ in range(2):
            for fun, args in calls:  # a new function each time: no trace reused
                jax.eval_shape(lambda *args, fun=fun: fun(*args), *args)
    except TRACING_ERRORS as error:
        return error
    finally:
        for owner, state in zip(owners, saved):
            if state is not None:
                _restore(owner, state)
    return None


# The functions JAX traced, by the shapes tried (oldest first, at most 256): a
# function is tried once per shapes, not at every call (a trial costs ~1-3 ms).
_TRACED: dict[Any, None] = {}


def structure(x: Any) -> Any:
    """The tree, shapes and dtypes of ``x``: a key of :func:`traced_before`."""
    leaves, tree = jax.tree.flatten(x)
    return tree, tuple((np.shape(a), np.result_type(a)) for a in leaves)


def traced_before(key: Any) -> bool:
    """Whether the functions and shapes of ``key`` were traced before."""
    return key in _TRACED


def remember_traced(key: Any) -> None:
    if len(_TRACED) >= 256:
        _TRACED.pop(next(iter(_TRACED)))
    _TRACED[key] = None


def shared_bounds(limits: Any, k: int) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """``(lower, upper)`` as ``k`` floats each where they are concrete and shared by
    every problem (scalars or ``(k,)``), else None (finite differences then ignore
    them)."""
    if limits is None:
        return None
    try:
        lower, upper = (np.broadcast_to(np.asarray(b, float), (k,)) for b in limits)
    except (TypeError, ValueError, jax.errors.TracerArrayConversionError):
        return None
    return tuple(map(float, lower)), tuple(map(float, upper))


def _restore(owner: Any, state: dict[str, Any]) -> None:
    try:
        attributes = vars(owner)
        attributes.clear()
        attributes.update(state)
    except (TypeError, AttributeError):  # a read-only mapping (a class): leave it
        pass


_WARNED: set[Any] = set()


def warn_on_host(fun: Callable[..., Any], name: str, error: Exception, scheme: str | None) -> None:
    """:class:`HostFunctionWarning`, once per function (per its code)."""
    key = getattr(getattr(fun, "__func__", fun), "__code__", None) or id(fun)
    if key in _WARNED:
        return
    _WARNED.add(key)
    first = str(error).strip().splitlines()[0].rstrip(".")
    how = f"finite differences ({scheme!r}, as scipy)" if scheme else "your `jac`, on the host"
    warnings.warn(
        f"`{name}` ({qualified_name(fun)}) runs on the host through jax.pure_callback, one "
        f"Python call per fit and evaluation, its derivatives by {how}: JAX could not "
        f"trace it ({type(error).__name__}: {first}). To run it compiled, with exact "
        "derivatives: write it with jax.numpy (import jax.numpy as jnp; jnp.exp, not "
        "np.exp), with jnp.where instead of a Python `if` on a parameter, and keep no "
        "state between calls",
        HostFunctionWarning,
        stacklevel=_user_stacklevel(),
    )


def _user_stacklevel() -> int:
    """``stacklevel`` pointing at the user's line: the first frame outside fixedopt
    and JAX (a model's function is tried inside JAX's trace)."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith(
        ("fixedopt.", "jax.", "jaxlib.")
    ):
        frame, level = frame.f_back, level + 1
    return level


def qualified_name(f: Callable[..., Any]) -> str:
    inner = getattr(f, "fun", f)  # fixedopt's wrapper of an unhashable callable
    return str(getattr(inner, "__qualname__", None) or type(inner).__name__)


@dataclasses.dataclass
class _Memo:
    """The last call of a host function: its arguments and its answer."""

    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    last: dict[str, tuple[Any, ...]] = dataclasses.field(default_factory=dict)

    def call(self, name: str, fun: Callable[..., Any], x: list[Any], p: np.ndarray) -> Any:
        with self.lock:
            last = self.last.get(name)
            if last is not None and _same(last[0], x) and _same([last[1]], [p]):
                return last[2]
        out = fun()
        with self.lock:
            self.last[name] = ([np.array(a, copy=True) for a in x], np.array(p, copy=True), out)
        return out


def _same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(
        np.shape(u) == np.shape(v) and np.array_equal(u, v, equal_nan=True) for u, v in zip(a, b)
    )


@dataclasses.dataclass(frozen=True)
class HostCall:
    """``fun(x, p)`` (``p`` a 1-D array of parameters, ``x`` a tree of arrays), run
    on the host through ``jax.pure_callback``; its derivative in ``p`` is
    ``jac(x, p) -> (out.size, k)`` (on the host too) or ``scheme``'s finite
    differences, their points within ``bounds`` (``(lower, upper)``, shared by every
    problem) where given. Hashed by ``fun``, ``jac`` and ``scheme``; ``probes`` (concrete
    ``(x, p)`` at which the output's shape is read before the solve, as scipy calls
    its function once at the start) and the memo are not compared."""

    fun: Callable[[Any, np.ndarray], Any]
    jac: Callable[[Any, np.ndarray], Any] | None = None
    scheme: str = "2-point"
    bounds: tuple[tuple[float, ...], tuple[float, ...]] | None = None
    probes: tuple[tuple[Any, np.ndarray], ...] = dataclasses.field(default=(), compare=False)
    memo: _Memo = dataclasses.field(default_factory=_Memo, compare=False)
    shapes: dict[Any, tuple[int, ...]] = dataclasses.field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise ValueError(f"`jac` must be one of {SCHEMES} or a callable, got {self.scheme!r}")

    def __call__(self, x: Any, p: jax.Array) -> jax.Array:
        leaves, tree = jax.tree.flatten(x)
        shape = self.output_shape(tree, [np.shape(a) for a in leaves], p.shape[-1], p.dtype)

        @jax.custom_jvp
        def value(p: jax.Array) -> jax.Array:
            return self._callback("value", tree, leaves, p, shape)

        size = int(np.prod(shape, dtype=int))

        @jax.custom_jvp
        def jacobian(p: jax.Array) -> jax.Array:
            return self._callback("jacobian", tree, leaves, p, (size, p.shape[-1]))

        @jacobian.defjvp
        def curvature(primals: Any, tangents: Any) -> tuple[jax.Array, jax.Array]:
            # Second derivatives (minimize's Hessian-vector products: its start
            # check, L-BFGS's certification) by differences of the Jacobian.
            (p,), (dp,) = primals, tangents
            both = jax.numpy.concatenate([p, dp.astype(p.dtype)], axis=-1)
            changed = self._callback("direction", tree, leaves, both, (size, p.shape[-1]))
            return jacobian(p), changed

        @value.defjvp
        def rule(primals: Any, tangents: Any) -> tuple[jax.Array, jax.Array]:
            (p,), (dp,) = primals, tangents
            return value(p), (jacobian(p) @ dp).reshape(shape)

        out: jax.Array = value(p)
        return out

    def _callback(
        self, what: str, tree: Any, leaves: list[Any], p: jax.Array, shape: tuple[int, ...]
    ) -> jax.Array:
        dtype = np.dtype(p.dtype)
        core = [np.ndim(a) for a in leaves]
        one = {"value": self.value, "jacobian": self.jacobian, "direction": self.direction}[what]

        def host(leaves: list[Any], p: np.ndarray) -> np.ndarray:
            return _each(
                lambda x, q: one(tree.unflatten(x), q, dtype), leaves, core, p, shape, dtype
            )

        result = jax.ShapeDtypeStruct(shape, dtype)
        out: jax.Array = jax.pure_callback(host, result, leaves, p, vmap_method="expand_dims")
        return out

    def value(self, x: Any, p: np.ndarray, dtype: Any) -> np.ndarray:
        """``fun(x, p)`` as a ``dtype`` array (the last call's answer if repeated)."""
        leaves = jax.tree.leaves(x)
        return self.memo.call("value", lambda: np.asarray(self.fun(x, p), dtype), leaves, p)  # type: ignore[no-any-return]

    def jacobian(self, x: Any, p: np.ndarray, dtype: Any) -> np.ndarray:
        """The ``(out.size, k)`` Jacobian in ``p``: ``jac``'s, or finite differences."""
        leaves = jax.tree.leaves(x)
        if self.jac is None:
            f0 = self.value(x, p, dtype)
            if self.scheme == "cs":  # complex parameters in, the complex output kept
                fun = lambda q: np.asarray(self.fun(x, q))
            else:
                fun = lambda q: self.value(x, q, dtype)
            lower = upper = None
            if self.bounds is not None and len(self.bounds[0]) == p.size:
                lower, upper = (np.asarray(b, dtype) for b in self.bounds)
            return finite_differences(fun, p, f0, self.scheme, lower, upper).astype(dtype)
        jac = self.jac

        def call() -> np.ndarray:
            return np.asarray(jac(x, p), dtype)

        matrix = self.memo.call("jacobian", call, leaves, p)
        size = self.value(x, p, dtype).size
        if np.size(matrix) != size * p.size:
            raise ValueError(
                "`jac` must return one row per data point and one column per parameter, "
                f"shape {(size, p.size)}, got shape {np.shape(matrix)}"
            )
        return np.reshape(matrix, (size, p.size))

    def direction(self, x: Any, both: np.ndarray, dtype: Any) -> np.ndarray:
        """The Jacobian's derivative in the direction ``v`` (``both``: ``p`` and ``v``
        joined), by central differences of :meth:`jacobian` with the step
        ``eps ** (1/4) max(1, |p|)`` along ``v / |v|`` (the Jacobian itself carries
        errors of about ``eps ** (1/2)``: the step balances them against the
        differences' own, ``O(step^2)``); 0 for ``v = 0``."""
        p, v = np.split(np.asarray(both, dtype), 2)
        length = float(np.linalg.norm(v))
        if length == 0.0 or not np.isfinite(length):
            return np.zeros((self.value(x, p, dtype).size, p.size), dtype) * length
        eps = float(np.finfo(dtype).eps)
        step = eps**0.25 * max(1.0, float(np.linalg.norm(p)))
        ahead, behind = p + (step / length) * v, p - (step / length) * v
        change = self.jacobian(x, ahead, dtype) - self.jacobian(x, behind, dtype)
        return (change * (length / (2 * step))).astype(dtype)  # type: ignore[no-any-return]

    def output_shape(
        self, tree: Any, shapes: list[tuple[int, ...]], k: int, dtype: Any
    ) -> tuple[int, ...]:
        """The shape of ``fun``'s output for ``x`` of these leaf ``shapes`` and ``k``
        parameters: read from one host call at a probe of those shapes (ones where
        none is), once per shapes; a ``jac`` is checked there too."""
        key = (tree, tuple(shapes), k, np.dtype(dtype))
        if key not in self.shapes:
            x, p = self._probe(tree, shapes, k, dtype)
            with jax.ensure_compile_time_eval():  # a call on the host, not in the trace
                shape = tuple(np.shape(self.value(x, p, dtype)))
                if self.jac is not None:
                    self.jacobian(x, p, dtype)
            self.shapes[key] = shape
        return self.shapes[key]

    def _probe(
        self, tree: Any, shapes: list[tuple[int, ...]], k: int, dtype: Any
    ) -> tuple[Any, np.ndarray]:
        for x, p in self.probes:
            leaves, probe_tree = jax.tree.flatten(x)
            if probe_tree == tree and [np.shape(a) for a in leaves] == shapes and p.size == k:
                return x, np.asarray(p, dtype)
        x = tree.unflatten([np.ones(s) for s in shapes])
        return x, np.ones(k, dtype)


def _each(
    one: Callable[[list[Any], np.ndarray], np.ndarray],
    leaves: list[Any],
    core: list[int],
    p: np.ndarray,
    shape: tuple[int, ...],
    dtype: Any,
) -> np.ndarray:
    """``one(leaves, p)`` for every problem of a batch (``vmap_method="expand_dims"``:
    every operand has the same leading axes, of size 1 where it is shared)."""
    p = np.asarray(p)
    lead = p.ndim - 1
    leaves = [np.asarray(a) for a in leaves]
    shared = (a.shape[: a.ndim - c] for a, c in zip(leaves, core))
    batch = np.broadcast_shapes(p.shape[:lead], *shared)
    out = np.empty((*batch, *shape), dtype)
    for index in np.ndindex(*batch):
        row = [_pick(a, index) for a in leaves]
        out[index] = np.reshape(one(row, _pick(p, index)), shape)
    return out


def _pick(a: np.ndarray, index: tuple[int, ...]) -> np.ndarray:
    """``a`` at one problem's ``index`` on its leading axes (0 on an axis of size 1)."""
    picked: np.ndarray = a[tuple(i if n > 1 else 0 for i, n in zip(index, a.shape[: len(index)]))]
    return picked
