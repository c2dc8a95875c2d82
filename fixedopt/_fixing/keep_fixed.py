"""``keep_fixed``: an exact, element-wise freeze for any optax optimizer."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple, NoReturn

import jax
import jax.numpy as jnp
import numpy as np
import optax

from fixedopt._fixing import mask as _mask
from fixedopt._inputs import validate as _validate
from fixedopt._inputs.notices import caller_stacklevel
from fixedopt._inputs.validate import Mask, PyTree

_SCHEDULE_FREE = (
    "`{name}`: a fixedopt.KeepFixedState holds its optimizer's state in `inner_state`, "
    "where a schedule-free optimizer's z is zero at fixed entries, so "
    "optax.contrib.schedule_free_eval_params would return params / b1 there: use "
    "fixedopt.schedule_free_eval_params(state, params, fixed)"
)


class KeepFixedState(NamedTuple):
    """State of :func:`keep_fixed`: the wrapped optimizer's state, unchanged in form.

    Reading ``b1`` or ``z`` (what ``optax.contrib.schedule_free_eval_params`` reads)
    raises an ``AttributeError`` that names :func:`fixedopt.schedule_free_eval_params`.
    """

    inner_state: optax.OptState

    @property
    def b1(self) -> NoReturn:
        """Raises: schedule-free's ``b1`` is in ``inner_state`` (see the class)."""
        raise AttributeError(_SCHEDULE_FREE.format(name="b1"))

    @property
    def z(self) -> NoReturn:
        """Raises: schedule-free's ``z`` is in ``inner_state`` (see the class)."""
        raise AttributeError(_SCHEDULE_FREE.format(name="z"))


def _freeze_updates(mask: Mask, updates: PyTree) -> PyTree:
    # -0.0 rather than 0.0: x + (-0.0) == x bit for bit for every x, including -0.0,
    # whereas (-0.0) + 0.0 == +0.0 would flip the sign bit of a fixed negative zero.
    return jax.tree.map(lambda m, u: _select_constant(m, -0.0, u), mask, updates)


def _zero_fixed(mask: Mask, tree: PyTree) -> PyTree:
    return jax.tree.map(lambda m, t: _select_constant(m, 0.0, t), mask, tree)


def _select_constant(mask: bool | jax.Array, constant: float, x: jax.Array) -> jax.Array:
    """``where(mask, constant, x)``: a select on the boolean mask itself, so that the
    mask stays one byte an entry in memory. (Integer bit operations on a widened mask
    cost more: XLA hoists the widening out of a training loop, or folds it into a
    constant, and every step then reads 4-byte masks; ``docs/decisions.md``, "The
    fixed mask read as one byte".)"""
    return _mask.select(mask, jnp.asarray(constant, x.dtype), x)


def _fixed_value_fn(
    value_fn: Callable[..., jax.Array], mask: Mask, params: PyTree
) -> Callable[..., jax.Array]:
    """``value_fn`` whose fixed entries are pinned to ``params`` inside the function."""
    pinned = jax.lax.stop_gradient(params)

    @functools.wraps(value_fn)
    def fixed_value_fn(candidate: PyTree, *args: Any, **kwargs: Any) -> jax.Array:
        return value_fn(_mask.tree_select(mask, pinned, candidate), *args, **kwargs)

    return fixed_value_fn


def keep_fixed(
    optimizer: optax.GradientTransformation, fixed: Mask
) -> optax.GradientTransformationExtraArgs:
    """Wrap any optax optimizer so that fixed entries never move, exactly.

    Unlike ``optax.masked`` (which passes the raw gradient through on masked-out
    leaves, so they still move) or ``optax.freeze`` (whole leaves, static masks only),
    ``keep_fixed`` works per element, with static or traced masks, and for every
    optimizer:

    * incoming gradients are zeroed on fixed entries, so moments and quasi-Newton
      memory never accumulate there;
    * outgoing updates are replaced by ``-0.0`` on fixed entries, so weight decay,
      momentum or anything else the optimizer adds cannot move them
      (``optax.apply_updates`` then leaves them bit-identical);
    * the extra arguments ``grad`` (masked) and ``value_fn`` (with fixed entries pinned
      to the current parameters) are forwarded, so ``optax.lbfgs`` and its zoom line
      search work;
    * the wrapped optimizer sees fixed parameters as zeros, from ``init`` on, so what
      it reads across entries (lamb's and lars's norms, prodigy's and DoG's distance
      from the start it keeps) ranges over free entries only, and a NaN or infinite
      fixed value cannot reach a free one.

    Limits (what ``keep_fixed`` cannot do for you):

    * With ``optax.apply_updates``, a fixed entry is ``x + (-0.0)``: bit-identical to
      ``x`` except that XLA on the CPU flushes a subnormal ``x`` to ``±0`` (``init``
      warns where concrete parameters hold one at a fixed entry);
      :func:`fixedopt.apply_updates` selects instead and is exact for every value.
    * What an optimizer keeps of the parameters in its state is in its own view,
      zeros at fixed entries: for schedule-free, take the evaluation parameters from
      :func:`fixedopt.schedule_free_eval_params` (optax's own function would return
      ``params / b1`` there); pin any other parameters derived from a state with
      ``fixedopt.project(derived, fixed, params)``.

    Args:
      optimizer: any ``optax.GradientTransformation``.
      fixed: the fixed mask, per element or per leaf: a bool or boolean array per leaf
        of the parameters, a tree prefix of those (``{"Dense": False, "bias": True}``),
        or a callable ``params -> mask``. Arrays may be traced: a new mask with the
        same shapes does not recompile.

    Returns:
      An ``optax.GradientTransformationExtraArgs`` with state :class:`KeepFixedState`.

    Example:
      >>> import jax.numpy as jnp, optax
      >>> import fixedopt
      >>> params = jnp.array([1.0, 2.0, 3.0])
      >>> tx = fixedopt.keep_fixed(optax.adamw(0.1, weight_decay=0.5),
      ...                          fixed=jnp.array([False, True, False]))
      >>> state = tx.init(params)
      >>> updates, state = tx.update(jnp.ones(3), state, params)
      >>> optax.apply_updates(params, updates)[1] == params[1]
      Array(True, dtype=bool)
    """
    inner = optax.with_extra_args_support(optimizer)

    def mask_for(updates: PyTree, params: PyTree | None) -> Mask:
        if _validate.is_mask_function(fixed):
            if params is None:
                raise ValueError("`fixed` is a callable of the parameters: pass `params`")
            return _validate.normalize_fixed(fixed(params), updates, name="fixed")
        return _validate.normalize_fixed(fixed, updates, name="fixed")

    def init(params: PyTree) -> KeepFixedState:
        _validate.check_params(params, "params")
        # The inner optimizer sees the free entries alone, from its first state on:
        # what it keeps of the parameters (prodigy's and DoG's starting point,
        # schedule-free's z) holds zeros at fixed entries, as its updates will see.
        mask = mask_for(params, params)
        warn_if_subnormal_fixed(mask, params)
        return KeepFixedState(inner_state=inner.init(_zero_fixed(mask, params)))

    def update(
        updates: PyTree, state: KeepFixedState, params: PyTree | None = None, **extra_args: Any
    ) -> tuple[PyTree, KeepFixedState]:
        mask = mask_for(updates, params)
        updates = _zero_fixed(mask, updates)
        if "grad" in extra_args:
            extra_args["grad"] = _zero_fixed(mask, extra_args["grad"])
        if "value_fn" in extra_args and params is not None:
            extra_args["value_fn"] = _fixed_value_fn(extra_args["value_fn"], mask, params)
        # The inner optimizer sees fixed parameters as zeros too: norms (lamb, lars,
        # prodigy) and differences then range over free entries only, and a NaN or
        # infinite fixed value cannot reach a free one.
        free_params = None if params is None else _zero_fixed(mask, params)
        updates, inner_state = inner.update(updates, state.inner_state, free_params, **extra_args)
        return _freeze_updates(mask, updates), KeepFixedState(inner_state=inner_state)

    return optax.GradientTransformationExtraArgs(init, update)


def warn_if_subnormal_fixed(mask: Mask, params: PyTree) -> None:
    """A ``UserWarning`` where concrete ``params`` hold a subnormal value at a fixed
    entry and XLA flushes subnormals to zero here (the CPU does): ``x + (-0.0)``, what
    ``optax.apply_updates`` computes there, is then ``±0``, not ``x``. Traced
    parameters are not checked."""
    leaves, masks = jax.tree.leaves(params), jax.tree.leaves(mask)
    if any(isinstance(a, jax.core.Tracer) for a in (*leaves, *masks)):
        return
    for m, p in zip(masks, leaves):
        p = np.asarray(p)
        if not jnp.issubdtype(p.dtype, jnp.floating):
            continue
        tiny = jnp.finfo(p.dtype).tiny
        subnormal = np.broadcast_to(np.asarray(m), p.shape) & (p != 0) & (np.abs(p) < tiny)
        if np.any(subnormal) and _flushes(p.dtype):
            warnings.warn(
                f"`params` hold {int(np.sum(subnormal))} subnormal value(s) at fixed entries "
                f"(below {tiny:.3g} in {p.dtype}), which XLA flushes to zero on this "
                "backend: optax.apply_updates would turn them into ±0. Use "
                "fixedopt.apply_updates(params, updates, fixed), exact for every value",
                UserWarning,
                stacklevel=caller_stacklevel(),
            )
            return


@functools.cache
def _flushes(dtype: np.dtype[Any]) -> bool:
    """Whether XLA on the default backend flushes a subnormal ``x`` in ``x + (-0.0)``."""
    smallest = np.array(jnp.finfo(dtype).smallest_subnormal, dtype)
    return bool(jax.jit(lambda x: x + jnp.asarray(-0.0, dtype))(smallest) == 0)


def apply_updates(params: PyTree, updates: PyTree, fixed: Mask) -> PyTree:
    """``optax.apply_updates`` that leaves fixed entries untouched: no arithmetic on them.

    ``keep_fixed`` makes the update of a fixed entry ``-0.0``, and ``x + (-0.0)`` is
    ``x`` bit for bit in IEEE arithmetic; but XLA on the CPU flushes subnormal numbers
    to zero, so a subnormal fixed value would become ``±0``. This selects instead
    (``where(fixed, params, params + updates)``), so fixed entries keep their exact
    bits whatever the backend does with subnormals.

    Args:
      params: the parameters, an array or a pytree of arrays.
      updates: updates with the structure of ``params``.
      fixed: the fixed mask (see :func:`fixedopt.keep_fixed`).

    Returns:
      The new parameters, with the structure and dtypes of ``params``.

    Example:
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> params = jnp.array([1.0, 2.0])
      >>> new = fixedopt.apply_updates(params, jnp.array([0.3, 0.5]), jnp.array([True, False]))
      >>> print(new)
      [1.  2.5]
    """
    mask = _validate.normalize_fixed(fixed, params, name="fixed")
    moved = optax.apply_updates(params, updates)
    return jax.tree.map(lambda m, p, q: _mask.select(m, p, q), mask, params, moved)


def schedule_free_eval_params(state: optax.OptState, params: PyTree, fixed: Mask) -> PyTree:
    """``optax.contrib.schedule_free_eval_params`` for a schedule-free optimizer wrapped in
    :func:`keep_fixed`: the parameters to evaluate at, fixed entries exactly ``params``'.

    Inside :func:`keep_fixed` the wrapped optimizer sees fixed entries as zeros, so the
    sequence ``z`` that schedule-free keeps in its state holds zeros there; optax's own
    function, given ``state.inner_state`` and the parameters, would return
    ``params / b1`` at fixed entries. This one evaluates the free entries as optax does
    and selects the fixed ones from ``params`` bit for bit (NaN and infinite values
    included).

    Args:
      state: the state of the :func:`keep_fixed` optimizer (or any optax state holding
        one ``ScheduleFreeState``).
      params: the current parameters (the points the gradients are taken at).
      fixed: the fixed mask the optimizer was wrapped with.

    Returns:
      The evaluation parameters, with the structure and dtypes of ``params``.

    Example:
      >>> import jax.numpy as jnp, optax
      >>> import fixedopt
      >>> params, fixed = jnp.array([1.0, 2.0]), jnp.array([False, True])
      >>> tx = fixedopt.keep_fixed(optax.contrib.schedule_free_adamw(0.1, weight_decay=0.5), fixed)
      >>> state = tx.init(params)
      >>> updates, state = tx.update(jnp.ones(2), state, params)
      >>> params = optax.apply_updates(params, updates)
      >>> print(fixedopt.schedule_free_eval_params(state, params, fixed).round(4))
      [0.85 2.  ]
    """
    schedule_free = optax.tree.get(state, "ScheduleFreeState")
    if schedule_free is None:
        raise ValueError(
            "`state` holds no optax.contrib.ScheduleFreeState: it is not the state of a "
            "schedule-free optimizer"
        )
    mask = _validate.normalize_fixed(fixed(params) if _validate.is_mask_function(fixed) else fixed,
                                     params, name="fixed")  # fmt: skip
    evaluated = optax.contrib.schedule_free_eval_params(schedule_free, _zero_fixed(mask, params))
    return _mask.tree_select(mask, params, evaluated)
