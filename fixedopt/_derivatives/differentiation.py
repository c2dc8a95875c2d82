"""How a solve is differentiated: :class:`Implicit` or :class:`Unroll` (``differentiate=``).

The mode is an object, as optimistix's adjoints are, and it supplies everything that
depends on it, so that the driver, the solvers and the line searches never ask which
mode is in force:

- the loop primitive (:meth:`Differentiation.loop`): a ``lax.while_loop``, or, to be
  differentiated in reverse mode by unrolling, a fixed-length ``lax.scan``;
- one slot of a ring buffer (:meth:`~Differentiation.read_slot`,
  :meth:`~Differentiation.write_slot`), read and written without a per-row gather
  under ``vmap`` (:mod:`fixedopt._derivatives.ring`), or with plain dynamic slices that reverse
  mode can differentiate;
- what the solver sees of the inputs (:meth:`~Differentiation.stop`) and the
  derivative rule of the result (:meth:`~Differentiation.solution`): the implicit
  function theorem at the solution (:mod:`fixedopt._derivatives.implicit`), or the loop's own
  outputs.

A solver written against the contract (it runs its inner loops with
``problem.differentiate.loop``, say) is differentiable in either mode.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import inspect
import sys
import types
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import jax
import jax.numpy as jnp

from fixedopt._derivatives.implicit import DerivativeProblem, implicit_result
from fixedopt._derivatives.ring import plain_read_slot, plain_write_slot, read_slot, write_slot
from fixedopt._inputs.checks import describe, one_of

# A least-squares row of at most this many entries gives the implicit rule its gradient by
# forward mode (``Implicit(hessian="auto")``; fixedopt._objective.problem's
# differentiable_gradient).
FORWARD_GRADIENT_UP_TO = 8
HESSIANS = ("auto", "forward", "reverse")

State = TypeVar("State")  # a loop's carry: any pytree of arrays, the same every trip
Found = tuple[jax.Array, jax.Array, jax.Array]  # (x, value, grad_norm) of one row, flat


class Differentiation(abc.ABC):
    """Base of :class:`Implicit` and :class:`Unroll`: the loop primitive, the ring
    buffer's slot access and the derivative rule of one differentiation mode."""

    # Whether a batch may run through lanes (a while loop whose refills are a
    # lax.cond: fixedopt._driver.lanes), which reverse mode cannot pass.
    through_lanes: ClassVar[bool]
    # Whether the solve runs on stopped inputs and :meth:`solution` is applied after
    # it, outside the compiled solve (a program of its own), rather than inside it.
    rule_after_solve: ClassVar[bool]

    @abc.abstractmethod
    def loop(
        self,
        condition: Callable[[State], jax.Array | bool],
        body: Callable[[State], State],
        state: State,
        max_trips: int | None,
    ) -> State:
        """Run ``body`` while ``condition`` holds, at most ``max_trips`` times.

        Args:
          condition: ``state -> bool``, a scalar (``()``) boolean; it must turn False
            within ``max_trips`` trips (a line search counts its trials in it).
          body: ``state -> state``, with the same structure, shapes and dtypes.
          state: the initial state.
          max_trips: the static bound on the trips; None where it is not static (the
            driver's ``max_steps`` under :class:`Implicit`).
        """

    @abc.abstractmethod
    def read_slot(self, history: jax.Array, slot: jax.Array) -> jax.Array:
        """``history[slot]``: ``history`` of shape ``(slots, ...)``, ``slot`` an ``()``
        integer array (in a batch, one unbatched scalar)."""

    @abc.abstractmethod
    def write_slot(self, history: jax.Array, slot: jax.Array, value: jax.Array) -> jax.Array:
        """``history.at[slot].set(value)``, ``value`` of shape ``history.shape[1:]``."""

    @abc.abstractmethod
    def stop(self, inputs: Any) -> Any:
        """The inputs of a solve (a pytree) as the solver's loop sees them."""

    @abc.abstractmethod
    def solution(self, found: Found, problem: DerivativeProblem) -> Found:
        """``(x, value, grad_norm)`` of a row's solution, with their derivatives.

        ``found`` is what the loop returned; ``problem`` describes the row for a
        derivative rule that needs it."""

    def static_max_steps(self, max_steps: int) -> int | None:
        """``max_steps`` as the driver loop's static ``max_trips``, or None where the
        loop needs none (then a new ``max_steps`` reuses the compiled program)."""
        return None

    def forward_gradient_up_to(self) -> int:
        """The most entries of a least-squares row whose gradient the implicit rule
        differentiates by forward mode (:data:`FORWARD_GRADIENT_UP_TO`)."""
        return FORWARD_GRADIENT_UP_TO

    @abc.abstractmethod
    def check_captures(self, fun: Callable[..., Any], name: str, inputs: str) -> None:
        """Raise a ``ValueError`` naming ``name`` (the argument the user passed) and
        ``inputs`` (where the value goes instead) if ``fun`` closes over a value being
        differentiated that this mode cannot differentiate with respect to."""

    @abc.abstractmethod
    def check_differentiable(
        self, function: Callable[..., Any], *inputs: Any, what: str, advice: str = ""
    ) -> None:
        """Raise a ``ValueError`` naming ``what`` if this mode cannot differentiate
        ``function(*inputs)`` (traced only, not run); ``advice`` ends the message."""


@dataclasses.dataclass(frozen=True)
class Implicit(Differentiation):
    """Differentiate a solution by the implicit function theorem (the default).

    The solver runs on stopped inputs in ``lax.while_loop``s (a batch through lanes);
    ``jax.grad``/``jax.jvp`` of ``Solution.x`` solve one linear system on the free
    block of each row at the solution (fixed and bound-active entries held), and
    ``value`` and ``grad_norm`` are differentiated at that ``x`` (the envelope theorem
    for ``value``). Exact at a converged solution; no iteration is differentiated. Pass
    ``differentiate=fixedopt.Implicit()`` (or ``"implicit"``).

    Each row's derivative comes from that row alone. Where the free block's Hessian is
    singular (a rank-deficient fit), ``x`` gets the minimum-norm derivative in units
    scaled to the Hessian's diagonal (a parameter nothing depends on gets 0; see
    :mod:`fixedopt._derivatives.implicit`); a row whose gradient or Hessian at ``x``
    is not finite (NaN data, status ``NONFINITE``) gets 0 on its free entries,
    ``value`` and ``grad_norm``, so that a sum over the batch stays finite. A row
    stopped at ``MAX_STEPS`` gets the same rule at the point it reached. ``fun``
    must not close over a value being differentiated: pass it in ``args``.

    The solve itself runs on stopped inputs and the rule is a program of its own: under
    ``jax.grad`` the solve is the plain call's compiled program (reused if it ran
    before) and the rule compiles a Hessian, a decomposition and one backward pass.

    Args:
      hessian: how the rule differentiates a least-squares row's gradient ``J^T r``
        into its Hessian. ``"auto"`` (the default): with ``J`` by forward mode for a
        row of at most 8 parameters, else by reverse mode (``jax.grad``); ``"forward"``
        at any size; ``"reverse"`` never. Forward over forward mode costs ``n^2``
        directional derivatives of the residuals against reverse mode's ``n``, but a
        model that broadcasts scalar parameters over its points (every ``curve_fit``
        and ``fixedopt.models`` model) has no reduction left to transpose: two
        pseudo-Voigt peaks and a line (n = 8) compile their first gradient in 0.6x the
        time and run a batch's in 0.62x the time and 0.43x the memory, where an RK4
        integration written with vectors (n = 6) runs 1.26x slower
        (``docs/decisions.md``, "The implicit rule's gradient by forward mode"). A
        ``minimize`` row always uses reverse mode.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> import fixedopt
      >>> def x_of(c):
      ...     fun = lambda x, c: jnp.sum((x - c) ** 2)
      ...     return fixedopt.minimize(fun, jnp.zeros(2), jnp.array([True, False]),
      ...                              args=(c,), differentiate=fixedopt.Implicit()).x
      >>> print(jax.jacobian(x_of)(jnp.array([1.0, 2.0])).round(6) + 0.0)  # + 0.0: no -0.
      [[0. 0.]
       [0. 1.]]
    """

    hessian: str = "auto"

    through_lanes: ClassVar[bool] = True
    rule_after_solve: ClassVar[bool] = True

    def __post_init__(self) -> None:
        one_of("hessian", self.hessian, HESSIANS)

    def forward_gradient_up_to(self) -> int:
        """8 (``"auto"``), no limit (``"forward"``) or 0 (``"reverse"``)."""
        limits = {"auto": FORWARD_GRADIENT_UP_TO, "forward": sys.maxsize, "reverse": 0}
        return limits[self.hessian]

    def loop(
        self,
        condition: Callable[[State], jax.Array | bool],
        body: Callable[[State], State],
        state: State,
        max_trips: int | None,
    ) -> State:
        """``lax.while_loop(condition, body, state)``; ``max_trips`` is not needed."""
        return jax.lax.while_loop(condition, body, state)

    def read_slot(self, history: jax.Array, slot: jax.Array) -> jax.Array:
        """``fixedopt._derivatives.ring.read_slot``: a slice, not a gather, under ``vmap``."""
        row: jax.Array = read_slot(history, slot)
        return row

    def write_slot(self, history: jax.Array, slot: jax.Array, value: jax.Array) -> jax.Array:
        """``fixedopt._derivatives.ring.write_slot``: an in-place slice update under ``vmap``."""
        written: jax.Array = write_slot(history, slot, value)
        return written

    def stop(self, inputs: Any) -> Any:
        """``stop_gradient(inputs)``: derivatives come from :meth:`Implicit.solution` alone."""
        return jax.lax.stop_gradient(inputs)

    def solution(self, found: Found, problem: DerivativeProblem) -> Found:
        """The implicit derivatives (``fixedopt._derivatives.implicit.implicit_result``)."""
        return implicit_result(problem, *found)

    def check_captures(self, fun: Callable[..., Any], name: str, inputs: str) -> None:
        """ValueError if ``fun`` closes over a value being differentiated (a JAX tracer
        of ``jax.grad``, ``jax.jvp``...): the solve runs on its inputs stopped and the
        rule differentiates with respect to ``args``, which it cannot see in a closure;
        it names the argument the user passed and its inputs."""
        captured = [where for where, value in captured_values(fun) if _differentiated(value)]
        if captured:
            raise ValueError(
                f"`{name}` closes over a value that is being differentiated "
                f"({captured[0]}); the implicit derivative of a solve reaches only its "
                f'inputs: pass the value through {inputs}, or use differentiate="unroll"'
            )

    def check_differentiable(
        self, function: Callable[..., Any], *inputs: Any, what: str, advice: str = ""
    ) -> None:
        """Nothing to check: no iteration is differentiated."""


@dataclasses.dataclass(frozen=True)
class Unroll(Differentiation):
    """Differentiate through every iteration of the solve.

    Every loop (the driver's and the line searches') becomes a ``lax.scan`` over its
    maximum trip count whose body keeps the state once the loop's condition fails: the
    same iterates, at the cost of always running to the maximum, and ``jax.grad``
    passes through them. For comparison and for solves stopped early; it takes far
    more time and memory than :class:`Implicit`, and a batch runs as one ``vmap`` (no
    lanes, no ``progress``, no ``vectorized`` objective). A solver whose own code runs
    a ``lax.while_loop`` (``fixedopt.Optax`` of ``optax.lbfgs``) raises a
    ``ValueError``. Pass ``differentiate=fixedopt.Unroll()`` (or ``"unroll"``).

    A row whose start already meets a stopping test (or whose solve accepts no step)
    never moves beyond rounding, so no iteration carries its derivative: it gets the
    implicit derivative of that fixed point (:class:`Implicit`'s rule), not 0. A row
    that took a few steps gets the derivative of those steps, which approaches the
    fixed point's only as they converge.
    """

    through_lanes: ClassVar[bool] = False
    rule_after_solve: ClassVar[bool] = False

    def loop(
        self,
        condition: Callable[[State], jax.Array | bool],
        body: Callable[[State], State],
        state: State,
        max_trips: int | None,
    ) -> State:
        """A ``lax.scan`` of ``max_trips`` trips whose body keeps the state once
        ``condition`` is False."""
        if max_trips is None:
            raise ValueError("an unrolled loop needs a static `max_trips`")

        def trip(state: State, _: None) -> tuple[State, None]:
            going = condition(state)
            new = body(state)
            return jax.tree.map(lambda a, b: jnp.where(going, a, b), new, state), None

        final: State = jax.lax.scan(trip, state, None, length=max_trips)[0]
        return final

    def read_slot(self, history: jax.Array, slot: jax.Array) -> jax.Array:
        """A ``dynamic_slice`` (a gather under ``vmap``), which reverse mode passes."""
        return plain_read_slot(history, slot)

    def write_slot(self, history: jax.Array, slot: jax.Array, value: jax.Array) -> jax.Array:
        """A ``dynamic_update_slice`` (a scatter under ``vmap``)."""
        return plain_write_slot(history, slot, value)

    def stop(self, inputs: Any) -> Any:
        """``inputs`` unchanged: the derivatives flow through the iterations."""
        return inputs

    def solution(self, found: Found, problem: DerivativeProblem) -> Found:
        """``found``, whose loop outputs carry their derivatives; where the solve never
        moved the row's free entries from ``problem.start`` by more than rounding, the
        implicit derivative of that fixed point."""
        if problem.start is None:
            return found
        x, start = jax.lax.stop_gradient((found[0], problem.start))
        rounding = 16 * jnp.finfo(x.dtype).eps * jnp.maximum(jnp.abs(x), jnp.abs(start))
        moved = jnp.any((jnp.abs(x - start) > rounding) & ~problem.fixed)
        fixed_point = implicit_result(problem, *jax.lax.stop_gradient(found))
        x, value, grad_norm = (jnp.where(moved, a, b) for a, b in zip(found, fixed_point))
        return x, value, grad_norm

    def static_max_steps(self, max_steps: int) -> int | None:
        """``max_steps``: the driver loop is a scan of that length."""
        return max_steps

    def check_captures(self, fun: Callable[..., Any], name: str, inputs: str) -> None:
        """Nothing to check: the iterations carry the derivatives of what ``fun``
        closes over."""

    def check_differentiable(
        self, function: Callable[..., Any], *inputs: Any, what: str, advice: str = ""
    ) -> None:
        """ValueError if ``function`` runs a ``lax.while_loop``: reverse mode cannot pass
        one."""
        if _has_while_loop(jax.make_jaxpr(function)(*inputs).jaxpr):
            raise ValueError(
                f'{what} cannot be differentiated with differentiate="unroll" when it runs a '
                "lax.while_loop: reverse-mode differentiation (jax.grad) cannot pass a "
                f"while loop. {advice}".rstrip()
            )


IMPLICIT = Implicit()  # the default
DIFFERENTIATIONS: dict[str, Differentiation] = {"implicit": IMPLICIT, "unroll": Unroll()}


def differentiation_option(differentiate: object) -> Differentiation:
    """``differentiate=`` as a :class:`Differentiation`: an instance, or its alias
    ``"implicit"`` / ``"unroll"``; otherwise a ``ValueError`` naming the choices."""
    if isinstance(differentiate, Differentiation):
        return differentiate
    if isinstance(differentiate, str) and differentiate in DIFFERENTIATIONS:
        return DIFFERENTIATIONS[differentiate]
    raise ValueError(
        "`differentiate` must be fixedopt.Implicit(), fixedopt.Unroll() or one of "
        f"{sorted(DIFFERENTIATIONS)}, got {describe(differentiate)}"
    )


def captured_values(fun: Any, depth: int = 0) -> list[tuple[str, Any]]:
    """``(where, value)`` of the array leaves ``fun`` closes over: its closure cells,
    a ``functools.partial``'s arguments, a callable object's attributes (a bound
    method's object's), and those of the functions a wrapper holds (``fun``, ``func``,
    ``__wrapped__``, ``curve_fit``'s model), a few levels deep."""
    found: list[tuple[str, Any]] = []
    if depth > 4:
        return found
    found += _attribute_values(fun, depth)
    code = getattr(fun, "__code__", None)
    cells = getattr(fun, "__closure__", None) or ()
    names = code.co_freevars if code is not None else ()
    for name, cell in zip(names, cells):
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        found += [(f"`{name}`", leaf) for leaf in jax.tree.leaves(contents)]
    if isinstance(fun, functools.partial):
        found += [("an argument of a functools.partial", leaf)
                  for leaf in jax.tree.leaves((fun.args, fun.keywords))]  # fmt: skip
    for attribute in ("fun", "func", "__wrapped__"):
        inner = getattr(fun, attribute, None)
        if callable(inner) and inner is not fun:
            found += captured_values(inner, depth + 1)
    return found


_WRAPPED = ("fun", "func", "__wrapped__")  # followed by captured_values itself


def _attribute_values(fun: Any, depth: int) -> list[tuple[str, Any]]:
    """``(where, value)`` of the array leaves held in the attributes of a callable
    object (a class instance with ``__call__``, a dataclass), or of a bound method's
    object; the functions among them are followed (:func:`captured_values`)."""
    owner = getattr(fun, "__self__", None) if inspect.ismethod(fun) else fun
    if owner is None or isinstance(owner, (type, types.ModuleType)) or inspect.isroutine(owner):
        return []
    if dataclasses.is_dataclass(owner):
        attributes = {field.name: getattr(owner, field.name, None)
                      for field in dataclasses.fields(owner)}  # fmt: skip
    else:
        attributes = dict(getattr(owner, "__dict__", {}))
    found: list[tuple[str, Any]] = []
    for name, value in attributes.items():
        if owner is fun and name in _WRAPPED:
            continue
        if callable(value) and not isinstance(value, jax.Array):
            found += captured_values(value, depth + 1)
        else:
            found += [(f"its attribute `{name}`", leaf) for leaf in jax.tree.leaves(value)]
    return found


def _differentiated(value: Any) -> bool:
    """Whether ``value`` is a tracer of forward or reverse differentiation (JAX names
    their classes ``JVPTracer`` and ``LinearizeTracer``)."""
    if not isinstance(value, jax.core.Tracer):
        return False
    return any(word in type(value).__name__ for word in ("JVP", "Linearize"))


def _has_while_loop(jaxpr: Any) -> bool:
    """Whether a jaxpr, or one nested in it (``jit``, ``cond``, ``scan``, custom rules),
    has a ``while`` equation."""
    for equation in jaxpr.eqns:
        if equation.primitive.name == "while":
            return True
        for param in equation.params.values():
            for inner in param if isinstance(param, (tuple, list)) else (param,):
                inner = getattr(inner, "jaxpr", inner)  # a ClosedJaxpr holds a Jaxpr
                if hasattr(inner, "eqns") and _has_while_loop(inner):
                    return True
    return False
