"""Any optax optimizer as a fixedopt solver, through ``keep_fixed``."""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Hashable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from fixedopt._contract.solver import Problem, Solver, Step, StepContext
from fixedopt._contract.status import Outcome
from fixedopt._fixing.keep_fixed import keep_fixed
from fixedopt._numerics import reduce
from fixedopt._solvers.linesearch import within_rounding


@dataclasses.dataclass(frozen=True)
class Optax(Solver[optax.OptState]):
    """Run any optax optimizer to a tolerance or a step count, fixed entries frozen.

    The optimizer is wrapped in :func:`fixedopt.keep_fixed`, receives the masked
    gradient and the extra arguments ``value``, ``grad`` and ``value_fn`` (so
    ``optax.lbfgs`` and its line search work), and every iterate is projected onto the
    bounds. A step that produces a non-finite objective stops the row with
    ``Status.NONFINITE`` at its last finite iterate.

    With ``differentiate="unroll"``, an optimizer whose update runs a
    ``lax.while_loop`` (``optax.lbfgs`` and the other optax line searches) raises a
    ``ValueError`` when the solve is traced: reverse-mode differentiation cannot pass
    a while loop. ``differentiate="implicit"`` differentiates any optimizer's
    converged solution.

    Two ``Optax`` objects are equal (and hash equal) when built from equal optimizers:
    the same optax constructors with equal hyperparameters, so a solve with a new
    ``fixedopt.Optax(optax.adam(0.1))`` reuses the program compiled for the last one
    (the solver is part of the compiled program's key). An optax optimizer is a pair
    of closures; ``Optax`` compares their code and what they capture, read when it is
    made: numbers by value and type, concrete arrays by dtype, shape and bytes,
    schedules and chained transformations the same way, anything else (a traced
    value, an object without a value equality) by identity, which compiles anew.
    Without a model of the objective, only the gradient tests apply (``gtol`` with
    the secant curvature, ``abs_gtol``); a row whose ``x`` or ``f`` stops changing
    ends as STALLED, or CONVERGED if stationary to precision.

    Args:
      optimizer: an ``optax.GradientTransformation``.

    Example:
      >>> import jax.numpy as jnp, optax
      >>> import fixedopt
      >>> fun = lambda x: jnp.sum((x - 3.0) ** 2)
      >>> sol = fixedopt.minimize(fun, jnp.zeros(2), jnp.array([False, True]),
      ...                         solver=fixedopt.Optax(optax.lbfgs()))
      >>> print(sol.x.round(6))
      [3. 0.]
    """

    optimizer: optax.GradientTransformation
    _key: Hashable = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.optimizer, optax.GradientTransformation):
            raise TypeError(
                "`optimizer` must be an optax.GradientTransformation, "
                f"got {type(self.optimizer).__name__}"
            )
        object.__setattr__(self, "_key", structural_key(self.optimizer))

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Optax)
        return bool(self._key == other._key)

    def __hash__(self) -> int:
        return hash(self._key)

    def _wrapped(self, problem: Problem) -> optax.GradientTransformationExtraArgs:
        return keep_fixed(self.optimizer, problem.fixed)

    def init(
        self, problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array
    ) -> optax.OptState:
        return self._wrapped(problem).init(x)

    def step(
        self, problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array,
        state: optax.OptState, context: StepContext,
    ) -> Step[optax.OptState]:  # fmt: skip
        def value_fn(x_trial: jax.Array) -> jax.Array:
            return problem.value_and_grad(x_trial)[0]

        def update(grad: jax.Array, state: optax.OptState, x: jax.Array) -> Any:
            wrapped = self._wrapped(problem)
            return wrapped.update(grad, state, x, value=value, grad=grad, value_fn=value_fn)

        problem.differentiate.check_differentiable(
            update, grad, state, x, what="fixedopt.Optax", advice=_UNROLL_ADVICE
        )
        updates, new_state = update(grad, state, x)
        x_new = problem.project(optax.apply_updates(x, updates))
        value_new, grad_new = problem.value_and_grad(x_new)
        finite = jnp.isfinite(value_new) & reduce.all_true(jnp.isfinite(grad_new))
        moved = reduce.any_true(problem.free_part(x_new - x) != 0)
        # No progress at working precision: x or f no longer changes (a float32 row
        # near its minimum); the driver then decides whether it is stationary.
        flat = ~moved | within_rounding(value, value_new)
        outcome = jnp.where(flat, Outcome.ACCEPT_AND_STOP, Outcome.ACCEPT)
        outcome = jnp.where(finite, outcome, Outcome.FAIL_NONFINITE).astype(jnp.int32)
        no_model = jnp.asarray(jnp.inf, value.dtype)  # no ftol/xtol test without a model
        return Step(
            x=x_new,
            value=value_new,
            grad=grad_new,
            state=new_state,
            outcome=outcome,
            predicted=no_model,
            relative_step=no_model,
        )


# How to differentiate an optimizer whose update runs a while loop (optax.lbfgs and
# optax's other line searches do).
_UNROLL_ADVICE = (
    "optax.lbfgs and optax's other line searches run one in the optimizer's update. "
    'Use differentiate="implicit" (exact at a converged solution), or an optimizer '
    "without a line search such as optax.adam"
)


class _Identity:
    """A key equal only to a key of the same object: what cannot be compared by value."""

    def __init__(self, value: object) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.value is self.value

    def __hash__(self) -> int:
        return id(self.value)


_MAX_NODES = 10_000  # beyond this many objects an optimizer is compared by identity


class _OpaqueError(Exception):
    """Raised inside :func:`structural_key` to fall back to identity."""


def structural_key(optimizer: object) -> Hashable:
    """A hashable key equal for optimizers built alike: the functions' code (and
    module), and everything they capture, recursively (see :class:`Optax`); the
    optimizer's identity where a part cannot be compared by value."""
    nodes = [0]
    try:
        return ("value", _key(optimizer, (), nodes))
    except (_OpaqueError, RecursionError):
        return ("identity", _Identity(optimizer))


def _key(value: object, ancestors: tuple[int, ...], nodes: list[int]) -> Hashable:
    """The key of one captured value (``ancestors``: the ids above it, for cycles)."""
    nodes[0] += 1
    if nodes[0] > _MAX_NODES:
        raise _OpaqueError
    if id(value) in ancestors:  # a cycle: its position is its key
        return ("cycle", ancestors.index(id(value)))
    if value is None or isinstance(value, (bool, int, str, bytes, complex, type, np.dtype)):
        return (type(value), value)
    if isinstance(value, float):  # by bits: -0.0 and 0.0 compile to different constants
        return (float, value.hex())
    if isinstance(value, (np.ndarray, np.generic, jax.Array)):
        return _array_key(value)
    inner = (*ancestors, id(value))
    if isinstance(value, (tuple, list)):
        return (type(value), tuple(_key(item, inner, nodes) for item in value))
    if isinstance(value, dict):
        return (type(value), tuple((_key(k, inner, nodes), _key(v, inner, nodes))
                                   for k, v in value.items()))  # fmt: skip
    if isinstance(value, functools.partial):
        parts = (value.func, value.args, value.keywords)
        return ("partial", _key(parts, inner, nodes))
    if isinstance(value, types.MethodType):
        return ("method", _key((value.__func__, value.__self__), inner, nodes))
    if isinstance(value, types.FunctionType):
        return _function_key(value, inner, nodes)
    try:
        hash(value)
    except TypeError:
        return _Identity(value)
    return ("object", value)


def _array_key(value: np.ndarray | np.generic | jax.Array) -> Hashable:
    """A concrete array by type, dtype, shape, weak type and bytes; a traced one by
    identity."""
    if isinstance(value, jax.core.Tracer) or np.dtype(value.dtype) == object:
        return _Identity(value)
    weak = bool(getattr(value, "weak_type", False))
    data = np.asarray(value)
    return (type(value), data.dtype.str, data.shape, weak, data.tobytes())


def _function_key(
    function: types.FunctionType, inner: tuple[int, ...], nodes: list[int]
) -> Hashable:
    """A Python function by its code, its module's globals, defaults, attributes and
    the contents of its closure cells."""
    cells = []
    for cell in function.__closure__ or ():
        try:
            cells.append(cell.cell_contents)
        except ValueError:  # an empty cell
            cells.append(_EMPTY)
    captured = (function.__defaults__, function.__kwdefaults__, function.__dict__, cells)
    return ("function", function.__code__, id(function.__globals__),
            _key(captured, inner, nodes))  # fmt: skip


_EMPTY = object()  # the content of an empty closure cell (one object: equal to itself)
