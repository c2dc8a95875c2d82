"""A ``Solution`` as scipy users handle results: one ``OptimizeResult``-like dict per
row, or a pandas ``DataFrame`` (pandas is optional)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from fixedopt._contract.status import Status
from fixedopt._inputs.validate import PyTree
from fixedopt._results.solution_fields import SolutionFields

PER_ROW = ("value", "grad_norm", "steps", "converged", "status", "reason")  # one number each


def rows_of(sol: SolutionFields) -> int | None:
    """The batch size of ``sol``, or None for a single (unbatched) solve."""
    value = np.asarray(sol.value)
    return None if value.ndim == 0 else value.shape[0]


def path_name(path: tuple[Any, ...]) -> str:
    """A leaf's path as a reader writes it: ``A1`` for ``{"A1": ...}``, ``peaks.width``
    for nested dicts or attributes, ``layers[0].bias`` for sequences (not ``['A1']``)."""
    name = ""
    for key in path:
        if isinstance(key, jax.tree_util.SequenceKey):
            name += f"[{key.idx}]"
            continue
        if isinstance(key, jax.tree_util.DictKey):
            part = str(key.key)
        elif isinstance(key, jax.tree_util.GetAttrKey):
            part = key.name
        else:
            part = str(key)
        name += f".{part}" if name else part
    return name


def flat_names(x: PyTree, batched: bool) -> list[str]:
    """One name per entry of a row of ``x``: the leaf's :func:`path_name` + ``[index]``,
    in ``ravel_pytree`` order (dict keys sorted, as JAX flattens them)."""
    return _entry_names(jax.tree_util.tree_leaves_with_path(x), batched)


def _leaves_in_written_order(tree: PyTree, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, Any]]:
    """``(path, leaf)`` pairs with dicts walked in their own key order (``jax.tree``
    sorts dict keys; a user wrote them in an order of their own)."""
    if isinstance(tree, dict):
        pairs = []
        for key in tree:
            pairs += _leaves_in_written_order(tree[key], (*prefix, jax.tree_util.DictKey(key)))
        return pairs
    return [((*prefix, *path), leaf) for path, leaf in jax.tree_util.tree_leaves_with_path(tree)]


def written_order(template: PyTree, x: PyTree, batched: bool) -> list[int]:
    """The positions, in ``ravel_pytree`` order, of the entries of a row of ``x`` listed
    in ``template``'s own key order (``template``: ``x``'s tree as the user wrote it,
    e.g. the ``x0`` of the call: same structure and shapes)."""
    names = flat_names(x, batched)
    written = _entry_names(_leaves_in_written_order(template), batched)
    if sorted(written) != sorted(names):
        raise ValueError(
            f"`names` given as a tree must have the parameters' structure and shapes "
            f"(entries {names}), got entries {written}"
        )
    return [names.index(name) for name in written]


def _entry_names(pairs: list[tuple[Any, Any]], batched: bool) -> list[str]:
    """One name per entry of a row: the leaf's :func:`path_name` + ``[index]``."""
    names: list[str] = []
    for path, leaf in pairs:
        shape = np.shape(leaf)[1:] if batched else np.shape(leaf)
        prefix = path_name(path) or "x"
        if shape == ():
            names.append(prefix)
            continue
        for index in np.ndindex(*shape):
            names.append(prefix + "[" + ", ".join(map(str, index)) + "]")
    return names


def flat_rows(x: PyTree, batched: bool) -> np.ndarray:
    """``x`` as a ``(rows, n)`` NumPy array in ``ravel_pytree`` order."""
    leaves = [np.asarray(leaf) for leaf in jax.tree.leaves(x)]
    if not batched:
        leaves = [leaf[None] for leaf in leaves]
    return np.concatenate([leaf.reshape(leaf.shape[0], -1) for leaf in leaves], axis=1)


def _status_name(code: int) -> str:
    try:
        return Status(code).name
    except ValueError:
        return str(code)


def to_records(sol: SolutionFields) -> list[dict[str, Any]]:
    """One ``scipy.optimize.OptimizeResult``-like dict per row of ``sol``.

    Keys: ``x`` (the row's parameters, same tree as ``sol.x``, NumPy leaves), ``fun``
    (the objective value; the cost for least squares), ``success``, ``status`` (the
    :class:`fixedopt.Status` code), ``message`` (its name), ``nit`` (steps) and
    ``grad_norm`` and ``reason`` (the :class:`fixedopt.Reason` code). The problem the
    solution remembers (``fixed``, ``bounds``, ``at_bound``) is not a result: it is
    left out.

    Example:
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> sol = fixedopt.minimize(lambda x: jnp.sum((x - 1.0) ** 2), jnp.zeros((2, 2)),
      ...                         jnp.array([[False, True], [False, False]]), batched=True)
      >>> record = fixedopt.to_records(sol)[0]
      >>> record["message"], record["x"].round(6).tolist(), record["success"]
      ('CONVERGED', [1.0, 0.0], True)
    """
    batch = rows_of(sol)
    fields = {name: np.asarray(getattr(sol, name)) for name in PER_ROW}
    records = []
    for row in range(1 if batch is None else batch):

        def pick(a: Any, row: int | None = None if batch is None else row) -> Any:
            """The row of an array (a NumPy field or a JAX leaf); unbatched, the array."""
            return a if row is None else a[row]

        record: dict[str, Any] = {
            "x": jax.tree.map(lambda leaf, pick=pick: np.asarray(pick(leaf)), sol.x),
            "fun": pick(fields["value"]).item(),
            "success": bool(pick(fields["converged"])),
            "status": int(pick(fields["status"])),
            "message": _status_name(int(pick(fields["status"]))),
            "nit": int(pick(fields["steps"])),
            "grad_norm": pick(fields["grad_norm"]).item(),
            "reason": int(pick(fields["reason"])),
        }
        records.append(record)
    return records


def to_dataframe(sol: Any, names: list[str] | None = None, covariance: Any = None) -> Any:
    """A pandas ``DataFrame``, one row per fit: the fields of :func:`to_records`
    (``x`` spread into one column per parameter, named ``names`` or after the
    parameter tree), then for each parameter ``<name>_stderr`` (with a covariance)
    and ``<name>_at_bound`` (the solve's bound-active flags; with bounds). Needs
    pandas (``pip install pandas``); typed ``Any`` since pandas is optional.

    Args:
      sol: a :class:`fixedopt.Solution`, or the :class:`fixedopt.CurveFit` of
        ``curve_fit(..., result=True)`` (its solution and covariance).
      names: one name per parameter (flat order), by default after the tree.
      covariance: a :class:`fixedopt.Covariance` of ``sol`` (e.g.
        ``fixedopt.covariance(sol, residual_fun)``): its standard errors become
        ``<name>_stderr`` columns (``inf`` where the data cannot determine one).

    Example:
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> t = jnp.linspace(0.0, 1.0, 8)
      >>> y = jnp.stack([2.0 * t + 1.0 + 0.01 * jnp.cos(9 * t), -t + 3.0])
      >>> line = lambda t, slope, offset: slope * t + offset
      >>> _, _, fit = fixedopt.curve_fit(line, t, y, [1.0, 1.0], batched=True,
      ...                                bounds=([-0.5, 0.0], 5.0), result=True)
      >>> frame = fixedopt.to_dataframe(fit, names=["slope", "offset"])
      >>> frame[["slope", "slope_stderr", "slope_at_bound"]].round(3).values.tolist()
      [[1.994, 0.009, False], [-0.5, 0.204, True]]
    """
    if hasattr(sol, "solution") and hasattr(sol, "covariance"):  # a CurveFit
        sol, covariance = sol.solution, sol.covariance if covariance is None else covariance
    try:
        import pandas
    except ImportError as error:  # an optional dependency
        raise ImportError("fixedopt.to_dataframe needs pandas: pip install pandas") from error
    batched = rows_of(sol) is not None
    columns = flat_names(sol.x, batched) if names is None else list(names)
    values = flat_rows(sol.x, batched)
    if len(columns) != values.shape[1]:
        raise ValueError(
            f"`names` must name each of the {values.shape[1]} parameters, got {len(columns)}"
        )
    records = [{k: v for k, v in record.items() if k != "x"} for record in to_records(sol)]
    frame = pandas.DataFrame.from_records(records)
    extra: dict[str, np.ndarray] = {}
    if covariance is not None:
        stderr = flat_rows(covariance.stderr, batched)
        extra |= {f"{name}_stderr": stderr[:, i] for i, name in enumerate(columns)}
    if sol.bounds is not None:
        flags = flat_rows(sol.at_bound, batched).astype(bool)
        extra |= {f"{name}_at_bound": flags[:, i] for i, name in enumerate(columns)}
    parts = [pandas.DataFrame(values, columns=columns), frame, pandas.DataFrame(extra)]
    return pandas.concat(parts, axis=1)
