"""Each row set up once: its flat data (:class:`RowData`) and the objective that turns
that data into the :class:`~fixedopt._contract.solver.Problem` a solver sees.

The public functions ravel each row's pytree into one vector and mask the objective
with the fixed entries (in-function ``where``): gradients and Jacobian columns of fixed
entries are exactly zero, and ``fun`` never sees a drifted fixed value. Solvers never
see pytrees, batch axes or unmasked gradients.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from fixedopt._contract.solver import Problem
from fixedopt._derivatives.differentiation import Differentiation
from fixedopt._inputs import arrays
from fixedopt._inputs.validate import Bounds, PyTree
from fixedopt._objective.call_note import one_problem_note, rows_at_once_note
from fixedopt._objective.losses import Loss, flat_counts, split_data
from fixedopt._objective.reparam import pack, split
from fixedopt._objective.vectorized import lane_problem, residual_output


class RowData(NamedTuple):
    """One row's data, flat; in a batch, every row's, with a leading batch axis."""

    x0: jax.Array  # (n,) the starting point
    fixed: jax.Array  # (n,) bool
    fixed_values: jax.Array  # (n,)
    lower: jax.Array | None  # (n,), or None without bounds
    upper: jax.Array | None
    split_index: jax.Array | None  # (width,) strategy="split": packed free positions
    row_args: tuple[Any, ...]  # the leaves of ``args`` that are per row


def _flat(tree: PyTree) -> jax.Array:
    flat: jax.Array = ravel_pytree(tree)[0]
    return flat


def flatten_row(
    x0: PyTree,
    mask: PyTree,
    values: PyTree,
    bounds: Bounds | None,
    split_index: jax.Array | None,
    row_args: list[Any],
) -> RowData:
    """One row's :class:`RowData` from its trees (``vmap`` it for a batch)."""
    lower = upper = None
    if bounds is not None:
        lower, upper = _flat(bounds[0]), _flat(bounds[1])
    return RowData(
        _flat(x0), _flat(mask), _flat(values), lower, upper, split_index, tuple(row_args)
    )


class Objective(NamedTuple):
    """The user's ``fun`` for one row, flat and masked; builds each row's Problem.

    ``args_of(row_args)`` merges a row's per-row leaves of ``args`` with the shared
    ones. Built once per solve by :func:`objective`, which checks ``fun``'s output.
    """

    fun: Callable[..., Any]
    least_squares: bool  # residuals (least_squares) or a scalar (minimize)
    loss: Loss | None  # least squares: a robust loss or the Poisson likelihood; None: squares
    unravel: Callable[[jax.Array], PyTree]
    args_of: Callable[[tuple[Any, ...]], tuple[Any, ...]]
    differentiate: Differentiation  # the loops, and what of the inputs the solver sees
    jacobian: Callable[..., Any] | None  # jax.jacfwd or jax.jacrev (least squares)
    vectorized: bool = False  # fun takes the lane batch (see fixedopt._objective.vectorized)
    shared_args: tuple[Any, ...] = ()  # vectorized: the leaves of args shared by all rows
    merge_args: Callable[..., tuple[Any, ...]] | None = None  # (row_args, shared) -> args
    output_shape: tuple[int, ...] = ()  # one row's output (least squares: its residuals)
    loops: bool = False  # fun runs a loop (scan, while): its derivatives come out in memory

    def full_problem(self, data: RowData) -> Problem:
        """The row's problem in the full flat vector (its inputs as
        ``differentiate.stop`` lets the solver see them)."""
        if self.vectorized:
            output = residual_output(self.loss) if self.least_squares else None
            return lane_problem(self, data, output)
        data, args = self.differentiate.stop((data, self.args_of(data.row_args)))
        args, counts = split_data(self.loss, args)
        counts = flat_counts(counts, self.output_shape)  # raveled as the residuals are

        def call(flat_x: jax.Array) -> Any:
            out = self.fun(self.unravel(jnp.where(data.fixed, data.fixed_values, flat_x)), *args)
            # Data in a wider dtype than x0 (float64 data, float32 x0) must not widen
            # the loop's carry: the solve runs in the dtype of x0.
            return _cast_floating(out, flat_x.dtype)

        functions = _residual_functions(call, self, counts) if self.least_squares else {}
        value_and_grad = functions.pop("value_and_grad", jax.value_and_grad(call))
        return Problem(
            value_and_grad, data.fixed, data.fixed_values, data.lower, data.upper,
            differentiate=self.differentiate, **functions,
        )  # fmt: skip

    def problem(self, data: RowData) -> Problem:
        """The problem the solver runs on: the full one, or packed for ``split``."""
        full = self.full_problem(data)
        return full if data.split_index is None else split(full, data.split_index)

    def start(self, data: RowData) -> jax.Array:
        """The starting point in the solver's variables (packed for ``split``)."""
        x0 = self.differentiate.stop(data.x0)
        return x0 if data.split_index is None else pack(x0, data.split_index)


def objective(
    fun: Callable[..., Any],
    least_squares: bool,
    loss: Loss | None,
    x0_row: PyTree,
    args_of: Callable[[tuple[Any, ...]], tuple[Any, ...]],
    differentiate: Differentiation,
    one_row: RowData,
) -> Objective:
    """The :class:`Objective` of ``fun``, after checking its output once.

    ``x0_row`` gives the row's tree structure (shapes only); ``one_row`` is the shape
    of one row's :class:`RowData` (``jax.ShapeDtypeStruct`` leaves are enough).
    """
    unravel = ravel_pytree(x0_row)[1]
    partial = Objective(fun, least_squares, loss, unravel, args_of, differentiate, None)

    def output(data: RowData) -> Any:
        args = split_data(loss, args_of(data.row_args))[0]
        return fun(unravel(jnp.where(data.fixed, data.fixed_values, data.x0)), *args)

    try:
        traced, out = jax.make_jaxpr(output, return_shape=True)(one_row)
    except Exception as error:  # the user's function failed while tracing: say how it was called
        error.add_note(one_problem_note(fun, x0_row))
        raise
    n = one_row.x0.shape[-1]
    if not least_squares:
        _check_scalar(out)
        return partial
    _check_residuals(out)
    _check_counts(loss, args_of(one_row.row_args), out.shape)
    # Forward mode when there are at least as many residuals as unknowns.
    jacobian = jax.jacfwd if out.size >= n else jax.jacrev
    return partial._replace(jacobian=jacobian, output_shape=tuple(out.shape),
                            loops=_has_loops(traced.jaxpr))  # fmt: skip


def _has_loops(jaxpr: Any) -> bool:
    """Whether ``jaxpr`` or one nested in it (a ``jit``, a ``cond``'s branches) runs a
    loop: a ``while``, or a ``scan`` that is not unrolled whole (``jnp.polyval``'s is)."""
    for equation in jaxpr.eqns:
        name, params = equation.primitive.name, equation.params
        if name == "while" or (name == "scan" and _rolled(params["length"], params["unroll"])):
            return True
        for value in equation.params.values():
            for inner in value if isinstance(value, (tuple, list)) else (value,):
                inner = getattr(inner, "jaxpr", inner)
                if hasattr(inner, "eqns") and _has_loops(inner):
                    return True
    return False


def _rolled(length: int, unroll: int | bool) -> bool:
    return unroll is not True and int(unroll) < length


def vectorized_objective(
    fun: Callable[..., Any],
    least_squares: bool,
    loss: Loss | None,
    x0_row: PyTree,
    differentiate: Differentiation,
    one_row: RowData,
    shared: tuple[Any, ...],
    merge_args: Callable[..., tuple[Any, ...]],
) -> Objective:
    """The :class:`Objective` of a ``fun`` that takes the lane batch
    (``vectorized=True``), its output checked on one row; ``merge_args(row_args,
    shared)`` makes ``fun``'s args from the per-row and the ``shared`` leaves."""
    unravel = ravel_pytree(x0_row)[1]

    def args_of(row_args: tuple[Any, ...]) -> tuple[Any, ...]:
        return merge_args(row_args, shared)

    vectorized = Objective(fun, least_squares, loss, unravel, args_of, differentiate, None, True,
                           shared, merge_args)  # fmt: skip
    return vectorized._replace(output_shape=_check_vectorized(vectorized, one_row, x0_row))


def _check_vectorized(objective: Objective, one_row: RowData, x0_row: PyTree) -> tuple[int, ...]:
    """``fun`` of a vectorized objective returns one output per row (checked on one;
    ``x0_row`` is a row of ``x``, for the shapes); returns one row's output shape."""
    rows = jax.tree.map(lambda a: jax.ShapeDtypeStruct((1, *a.shape), a.dtype), one_row)

    def output(data: RowData) -> Any:
        x = jax.vmap(objective.unravel)(jnp.where(data.fixed, data.fixed_values, data.x0))
        args = split_data(objective.loss, objective.args_of(data.row_args))[0]
        return objective.fun(x, *args)

    try:
        out = jax.eval_shape(output, rows)
    except Exception as error:  # the user's function failed while tracing: say how it was called
        x = jax.tree.map(lambda a: jax.ShapeDtypeStruct((1, *a.shape), a.dtype), x0_row)
        error.add_note(rows_at_once_note(objective.fun, x, "a batch of 1 row, to check the output"))
        raise
    shape = getattr(out, "shape", None)
    scalar = not objective.least_squares
    if shape is None or shape[:1] != (1,) or (scalar and len(shape) != 1):
        expected = "(rows,)" if scalar else "(rows, ...) residuals"
        raise ValueError(
            f"with vectorized=True, `fun` must return {expected} for a batch of rows, got "
            f"shape {shape} for 1 row"
        )
    if not jnp.issubdtype(out.dtype, jnp.floating):
        raise ValueError(f"`fun` must return floating-point values, got {out.dtype}")
    if objective.least_squares:
        row_args = jax.tree.map(arrays.one_row, rows.row_args)
        _check_counts(objective.loss, objective.args_of(row_args), shape[1:])
    return tuple(shape[1:])


def _check_counts(loss: Loss | None, args: tuple[Any, ...], shape: tuple[int, ...]) -> None:
    """The Poisson likelihood's counts (the last of ``args``, one row's) broadcast to
    one row's model output, of ``shape``."""
    counts = split_data(loss, args)[1]
    if counts is None:
        return
    try:
        fits = np.broadcast_shapes(counts.shape, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"`counts` must broadcast to one row's model output, of shape {shape}; got "
            f"{tuple(counts.shape)} for a row"
        )


def _check_scalar(out: Any) -> None:
    if not (hasattr(out, "shape") and out.shape == () and jnp.issubdtype(out.dtype, jnp.floating)):
        raise ValueError(
            "`fun` must return a floating-point scalar for one problem, got "
            f"{getattr(out, 'dtype', type(out).__name__)} of shape {getattr(out, 'shape', '?')}"
        )


def _check_residuals(out: Any) -> None:
    if not (hasattr(out, "dtype") and jnp.issubdtype(out.dtype, jnp.floating)):
        raise ValueError(
            "`residual_fun` must return a floating-point array of residuals, got "
            f"{getattr(out, 'dtype', type(out).__name__)}"
        )


def _cast_floating(out: Any, dtype: Any) -> Any:
    if hasattr(out, "dtype") and jnp.issubdtype(out.dtype, jnp.floating):
        return out.astype(dtype)
    return out


DifferentiableObjective = Callable[[jax.Array, jax.Array, jax.Array, tuple[Any, ...]], jax.Array]
# ``(x, fixed, values, args) -> grad``: a differentiable objective's gradient in ``x``.
DifferentiableGradient = DifferentiableObjective


def differentiable_objective(
    fun: Callable[..., Any],
    least_squares: bool,
    loss: Loss | None,
    unravel: Callable[[jax.Array], PyTree],
    vectorized: bool = False,
) -> DifferentiableObjective:
    """``(x, fixed, values, args) -> f``: one row's objective with fixed entries read
    from ``values``, not stopped, for implicit differentiation. It closes over no
    traced value (``unravel`` holds only shapes), as ``custom_jvp`` requires. A
    ``vectorized`` ``fun`` is called on a batch of this one row (its per-row ``args``
    already have the leading axis of one row)."""
    output = _row_output(fun, loss, unravel, vectorized)

    def objective(
        x: jax.Array, fixed: jax.Array, values: jax.Array, args: tuple[Any, ...]
    ) -> jax.Array:
        out, counts = output(x, fixed, values, args)
        if not least_squares:
            value: jax.Array = out[0] if vectorized else out
            return value
        return _cost(loss, out, counts)

    return objective


def differentiable_gradient(
    fun: Callable[..., Any],
    loss: Loss | None,
    unravel: Callable[[jax.Array], PyTree],
    vectorized: bool = False,
) -> DifferentiableGradient:
    """``(x, fixed, values, args) -> grad``: the gradient in ``x`` of a least-squares
    row's :func:`differentiable_objective` as ``J^T c``, the residuals' Jacobian ``J``
    by forward mode and ``c`` the cost's slope in the residuals, for a derivative rule
    to differentiate again by forward mode: no reduction per scalar parameter broadcast
    over a model's points, where reverse mode (``jax.grad``) would transpose each
    broadcast into one. ``fixedopt.Implicit(hessian=...)`` says when the rule takes it
    (at most 8 entries by default) and what it costs.
    """
    output = _row_output(fun, loss, unravel, vectorized)

    def gradient(x: jax.Array, fixed: jax.Array, values: jax.Array, args: Any) -> jax.Array:
        def flat(x: jax.Array) -> tuple[jax.Array, tuple[Any, Any]]:
            out, counts = output(x, fixed, values, args)
            return jnp.ravel(out), (out, counts)

        # One evaluation of the model: its value comes with the Jacobian.
        jacobian, (out, counts) = jax.jacfwd(flat, has_aux=True)(x)
        # The cost's slope by jax.grad of the loss's cost, which broadcasts counts of any
        # shape to the output (value_and_cotangent takes both raveled, as a step has them).
        slope = jax.grad(lambda out: _cost(loss, out, counts))(out)
        grad_of_cost: jax.Array = jacobian.T @ jnp.ravel(slope)
        return grad_of_cost.astype(x.dtype)  # as jax.grad's, whatever fun promotes to

    return gradient


def _row_output(
    fun: Callable[..., Any], loss: Loss | None, unravel: Callable[[jax.Array], PyTree],
    vectorized: bool,
) -> Callable[..., tuple[Any, Any]]:  # fmt: skip
    """``(x, fixed, values, args) -> (out, counts)``: ``fun``'s output for one row with
    its fixed entries read from ``values`` (a ``vectorized`` ``fun``'s keeps the batch
    axis of one row), and the counts a loss holds in ``args`` (or None)."""

    def output(x: jax.Array, fixed: jax.Array, values: jax.Array, args: Any) -> tuple[Any, Any]:
        fun_args, counts = split_data(loss, args)
        tree = unravel(jnp.where(fixed, values, x))
        if vectorized:  # this row as a batch of one: its output and counts keep that axis
            tree = jax.tree.map(lambda a: a[None], tree)
        return fun(tree, *fun_args), counts

    return output


def _cost(loss: Loss | None, out: jax.Array, counts: Any) -> jax.Array:
    """A least-squares row's objective of its output ``out``."""
    return 0.5 * jnp.sum(jnp.ravel(out) ** 2) if loss is None else loss.cost(out, counts)


def _residual_functions(
    call: Callable[[jax.Array], Any], objective: Objective, counts: jax.Array | None
) -> dict[str, Any]:
    """``value_and_grad`` and ``residual_and_jacobian`` of a least-squares row
    (the rescaled residuals and Jacobian of a robust loss or of the Poisson
    likelihood, whose data are ``counts``)."""
    loss = objective.loss
    jacobian_of = objective.jacobian
    assert jacobian_of is not None  # set by objective() for least squares

    def residual(flat_x: jax.Array) -> jax.Array:
        return jnp.ravel(call(flat_x))

    def value_and_grad(flat_x: jax.Array) -> tuple[jax.Array, jax.Array]:
        r, pullback = jax.vjp(residual, flat_x)
        if loss is not None:
            value, cotangent = loss.value_and_cotangent(r, counts)
            return value, pullback(cotangent)[0]
        return 0.5 * jnp.dot(r, r), pullback(r)[0]

    def residual_and_jacobian(flat_x: jax.Array) -> tuple[jax.Array, jax.Array]:
        def with_aux(x: jax.Array) -> tuple[jax.Array, jax.Array]:
            r = residual(x)
            return r, r

        jacobian, r = jacobian_of(with_aux, has_aux=True)(flat_x)
        if loss is not None:
            return loss.rescale(r, jacobian, counts)[1:]
        return r, jacobian

    return {
        "value_and_grad": value_and_grad,
        "residual_and_jacobian": residual_and_jacobian,
        "robust": loss is not None,
        "likelihood": loss is not None and loss.likelihood,
    }
