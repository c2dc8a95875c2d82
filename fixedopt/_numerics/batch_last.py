"""``vmap`` with the batch on the last axis of every array, inside the program too.

``jax.vmap(f, in_axes=-1, out_axes=-1)`` takes and returns arrays batch-last, but its
batching rules choose where the batch lives in between: an elementwise operation between
a batched and an unbatched array, a dot, a broadcast move it to the front. On a TPU,
which tiles an array's two minor axes by ``(8, 128)``, a small row's arrays then hold
their few entries on the 128-wide axis and XLA adds transposes between the layouts
(docs/decisions.md, "The batch on a TPU's lanes": 250 transposes in Gpufit's program).

:func:`vmap_last` evaluates ``f``'s program for one row with the batch appended as the
last axis of every value, by construction: a primitive whose parameters name axes
counts them from the front, so appending an axis at the end leaves them valid, and the
few primitives that build shapes (broadcasts, reshapes, slices, dots) are given the
extra axis here. A dot becomes products and sums over the batch (a row's contractions
are short: elementwise arithmetic on ``(..., B)`` arrays, not a batched matrix product
of tiny matrices). Any other primitive falls back to ``jax.vmap`` of itself, batch last
in and out. The values are a row's arithmetic as written, in another order of
evaluation where a dot's sums are concerned.

  >>> import jax, jax.numpy as jnp
  >>> f = lambda p, t: p[0] * jnp.exp(-t / p[1]) @ jnp.ones(3)
  >>> p, t = jnp.ones((2, 4)), jnp.broadcast_to(jnp.arange(3.0)[:, None], (3, 4))
  >>> bool(jnp.allclose(vmap_last(f)(p, t), jax.vmap(f, in_axes=-1)(p, t)))
  True
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend import core

Value = tuple[Any, bool]  # an array and whether it holds the batch on its last axis

# Primitives applied entry by entry (the same shape in as out): given every operand
# batch-last with the output's shape, they are the row's operation as written.
ELEMENTWISE = frozenset("""
    abs acos acosh add and asin asinh atan atan2 atanh cbrt ceil clamp conj copy copy_p cos
    cosh digamma div eq erf erf_inv erfc exp exp2 expm1 floor ge gt imag integer_pow
    is_finite le lgamma log log1p logistic lt max min mul ne neg nextafter not or pow
    real reduce_precision rem round rsqrt select_n shift_left shift_right_arithmetic
    shift_right_logical sign sin sinh sqrt square sub tan tanh xor convert_element_type
    stop_gradient add_any bitcast_convert_type
""".split())
# Primitives whose parameters name a row's axes from the front: unchanged by the batch.
AXES_FROM_FRONT = frozenset("""
    reduce_sum reduce_max reduce_min reduce_prod reduce_and reduce_or reduce_xor argmax
    argmin cumsum cumprod cummax cummin cumlogsumexp squeeze split stack
""".split())
# Primitives that call a program of their own: evaluated here, inlined.
CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr", "custom_jvp_call": "call_jaxpr",
         "custom_vjp_call": "call_jaxpr", "checkpoint": "jaxpr", "remat": "jaxpr"}  # fmt: skip


def vmap_last(fun: Callable[..., Any]) -> Callable[..., Any]:
    """``fun`` of one row, mapped over arrays whose last axis is the batch (every leaf of
    the arguments), returning leaves whose last axis is the batch."""

    @functools.wraps(fun)
    def mapped(*args: Any) -> Any:
        leaves, tree = jax.tree.flatten(args)
        size = leaves[0].shape[-1]
        rows = [jax.ShapeDtypeStruct(a.shape[:-1], a.dtype) for a in leaves]
        program, shapes = jax.make_jaxpr(
            lambda *row: fun(*jax.tree.unflatten(tree, row)), return_shape=True
        )(*rows)
        outs = evaluate(program.jaxpr, program.consts, [(a, True) for a in leaves], size)
        return jax.tree.unflatten(jax.tree.structure(shapes), [batched(o, size) for o in outs])

    return mapped


def batched(value: Value, size: int) -> jax.Array:
    """``value``'s array with the batch (``size`` rows) on its last axis."""
    array, is_batched = value
    if is_batched:
        return array
    array = jnp.asarray(array)
    return lax.broadcast_in_dim(array, (*array.shape, size), tuple(range(array.ndim)))


def evaluate(program: Any, consts: Sequence[Any], args: Sequence[Value], size: int) -> list[Value]:
    """``program`` (a jaxpr of one row) on batch-last ``args``: its outputs as values."""
    env: dict[Any, Value] = {}

    def read(var: Any) -> Value:
        if isinstance(var, core.Literal):
            return var.val, False
        return env[var]

    env.update((var, (c, False)) for var, c in zip(program.constvars, consts))
    env.update(zip(program.invars, args))
    for eqn in program.eqns:
        outs = _equation(eqn, [read(v) for v in eqn.invars], size)
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in program.outvars]


def _equation(eqn: Any, ins: list[Value], size: int) -> list[Value]:
    """One equation of a row's program on batch-last values."""
    name = eqn.primitive.name
    if not any(b for _, b in ins):
        return [(o, False) for o in _bind(eqn, [v for v, _ in ins])]
    if name in CALLS:
        inner = eqn.params[CALLS[name]]
        program, consts = (inner.jaxpr, inner.consts) if hasattr(inner, "jaxpr") else (inner, ())
        return evaluate(program, consts, ins, size)
    rule = _RULES.get(name)
    out = None if rule is None else rule(eqn, ins, size)
    if out is not None:
        return [(o, True) for o in (out if isinstance(out, list) else [out])]
    if name in ELEMENTWISE:
        shape = eqn.outvars[0].aval.shape
        operands = [_full(v, b, shape, size) for v, b in ins]
        return [(o, True) for o in _bind(eqn, operands)]
    if name in AXES_FROM_FRONT:
        operands = [batched((v, b), size) for v, b in ins]
        return [(o, True) for o in _bind(eqn, operands)]
    return _fallback(eqn, ins)


def _bind(eqn: Any, operands: list[Any]) -> list[Any]:
    """``eqn``'s primitive applied to ``operands`` with its parameters (a list)."""
    with eqn.ctx.manager:
        out = eqn.primitive.bind(*operands, **eqn.primitive.get_bind_params(eqn.params))
    return list(out) if eqn.primitive.multiple_results else [out]


def _fallback(eqn: Any, ins: list[Value]) -> list[Value]:
    """``jax.vmap`` of the primitive alone, batch last in and out."""
    axes = [-1 if b else None for _, b in ins]
    out = jax.vmap(lambda *a: _bind(eqn, list(a)), in_axes=axes, out_axes=-1)(
        *[v for v, _ in ins]
    )
    return [(o, True) for o in out]


def _full(array: Any, is_batched: bool, shape: tuple[int, ...], size: int) -> jax.Array:
    """``array`` (a row's operand, batch-last if ``is_batched``) broadcast to the
    batch-last ``shape + (size,)`` of an elementwise operation."""
    array = jnp.asarray(array)
    if is_batched:
        if array.shape[:-1] == shape:
            return array
        return lax.broadcast_in_dim(array, (*shape, size), (*range(array.ndim - 1), len(shape)))
    if array.ndim == 0 or array.shape != shape:
        array = jnp.broadcast_to(array, shape)
    return lax.broadcast_in_dim(array, (*shape, size), tuple(range(len(shape))))


def _broadcast_in_dim(eqn: Any, ins: list[Value], size: int) -> jax.Array | None:
    (operand, _), *dynamic = ins
    if dynamic:
        return None
    shape, dims = eqn.params["shape"], eqn.params["broadcast_dimensions"]
    return lax.broadcast_in_dim(operand, (*shape, size), (*dims, len(shape)))


def _reshape(eqn: Any, ins: list[Value], size: int) -> jax.Array | None:
    (operand, _), *dynamic = ins
    if dynamic or eqn.params.get("dimensions") is not None:
        return None
    return lax.reshape(operand, (*eqn.params["new_sizes"], size))


def _transpose(eqn: Any, ins: list[Value], size: int) -> jax.Array:
    permutation = eqn.params["permutation"]
    return lax.transpose(ins[0][0], (*permutation, len(permutation)))


def _slice(eqn: Any, ins: list[Value], size: int) -> jax.Array:
    p = eqn.params
    strides = None if p["strides"] is None else (*p["strides"], 1)
    return lax.slice(ins[0][0], (*p["start_indices"], 0), (*p["limit_indices"], size), strides)


def _concatenate(eqn: Any, ins: list[Value], size: int) -> jax.Array:
    return lax.concatenate([batched(v, size) for v in ins], eqn.params["dimension"])


def _pad(eqn: Any, ins: list[Value], size: int) -> jax.Array | None:
    (operand, is_batched), (value, value_batched) = ins
    if value_batched:
        return None
    config = (*eqn.params["padding_config"], (0, 0, 0))
    return lax.pad(batched((operand, is_batched), size), value, config)


def _dynamic_slice(eqn: Any, ins: list[Value], size: int) -> jax.Array | None:
    (operand, _), *indices = ins
    if any(b for _, b in indices):
        return None
    starts = [i for i, _ in indices] + [0]
    return lax.dynamic_slice(operand, starts, (*eqn.params["slice_sizes"], size))


def _dynamic_update_slice(eqn: Any, ins: list[Value], size: int) -> jax.Array | None:
    operand, update, *indices = ins
    if any(b for _, b in indices):
        return None
    starts = [i for i, _ in indices] + [0]
    return lax.dynamic_update_slice(batched(operand, size), batched(update, size), starts)


def _reduce(eqn: Any, ins: list[Value], size: int) -> list[jax.Array] | None:
    """A variadic reduction over a row's axes: its operands batch-last, its initial
    values (scalars) as they are."""
    operands, inits = ins[: len(ins) // 2], ins[len(ins) // 2 :]
    if any(b for _, b in inits):
        return None
    return _bind(eqn, [batched(v, size) for v in operands] + [v for v, _ in inits])


def _gather(eqn: Any, ins: list[Value], size: int) -> jax.Array | None:
    """A gather from a batch-last operand at a row's indices (unbatched): the batch is
    one more slice axis, taken whole, the output's last."""
    (operand, _), (indices, indices_batched) = ins
    if indices_batched:
        return None
    p = eqn.params
    numbers = p["dimension_numbers"]
    out_rank = len(eqn.outvars[0].aval.shape)
    numbers = numbers._replace(offset_dims=(*numbers.offset_dims, out_rank))
    return lax.gather(operand, indices, numbers, (*p["slice_sizes"], size),
                      indices_are_sorted=p["indices_are_sorted"],
                      unique_indices=p["unique_indices"], mode=p["mode"],
                      fill_value=p["fill_value"])  # fmt: skip


def _cond(eqn: Any, ins: list[Value], size: int) -> list[jax.Array] | None:
    """A ``cond`` at a row's index (unbatched): each branch evaluated batch-last, its
    outputs all batched."""
    (index, index_batched), *operands = ins
    if index_batched:
        return None
    flags = [b for _, b in operands]
    avals = [jax.ShapeDtypeStruct(jnp.shape(v), jnp.result_type(v)) for v, _ in operands]

    def branch(closed: Any) -> Any:
        def run(*values: Any) -> list[jax.Array]:
            outs = evaluate(closed.jaxpr, closed.consts, list(zip(values, flags)), size)
            return [batched(o, size) for o in outs]

        return jax.make_jaxpr(run)(*avals)

    params = dict(eqn.params, branches=tuple(branch(b) for b in eqn.params["branches"]))
    with eqn.ctx.manager:
        return list(eqn.primitive.bind(index, *[v for v, _ in operands], **params))


def _dot_general(eqn: Any, ins: list[Value], size: int) -> jax.Array:
    """A row's ``dot_general`` as products and sums over batch-last operands: each
    operand laid out as ``(batch dims, lhs free, rhs free, contracted, B)`` (a size-1
    axis for the other's free dims), multiplied, summed over the contracted axes."""
    lhs, rhs = batched(ins[0], size), batched(ins[1], size)
    ((lc, rc), (lb, rb)) = eqn.params["dimension_numbers"]
    out_dtype = eqn.outvars[0].aval.dtype
    lhs_free = [d for d in range(lhs.ndim - 1) if d not in lc and d not in lb]
    rhs_free = [d for d in range(rhs.ndim - 1) if d not in rc and d not in rb]
    last = lhs.ndim - 1
    left = lax.transpose(lhs, (*lb, *lhs_free, *lc, last))
    right = lax.transpose(rhs, (*rb, *rhs_free, *rc, rhs.ndim - 1))
    batch = [lhs.shape[d] for d in lb]
    free_l, free_r = [lhs.shape[d] for d in lhs_free], [rhs.shape[d] for d in rhs_free]
    contracted = [lhs.shape[d] for d in lc]
    shape = (*batch, *free_l, *free_r, *contracted, size)
    nb, nl, nr, nc = len(batch), len(free_l), len(free_r), len(contracted)
    left_dims = (*range(nb + nl), *range(nb + nl + nr, nb + nl + nr + nc + 1))
    right_dims = (*range(nb), *range(nb + nl, nb + nl + nr + nc + 1))
    product = lax.mul(
        lax.broadcast_in_dim(left.astype(out_dtype), shape, left_dims),
        lax.broadcast_in_dim(right.astype(out_dtype), shape, right_dims),
    )
    axes = tuple(range(nb + nl + nr, nb + nl + nr + nc))
    return jnp.sum(product, axis=axes, dtype=out_dtype) if axes else product


_RULES: dict[str, Callable[[Any, list[Value], int], Any]] = {
    "broadcast_in_dim": _broadcast_in_dim,
    "reshape": _reshape,
    "transpose": _transpose,
    "slice": _slice,
    "concatenate": _concatenate,
    "pad": _pad,
    "dynamic_slice": _dynamic_slice,
    "dynamic_update_slice": _dynamic_update_slice,
    "dot_general": _dot_general,
    "reduce": _reduce,
    "gather": _gather,
    "cond": _cond,
}
