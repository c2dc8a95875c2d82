"""A tree of per-row arrays whose scalars are held as one ``(rows, count)`` array per dtype.

The lanes' loop (:mod:`fixedopt._driver.lanes`) carries every row's data and loop state, a
pytree of a dozen or more leaves, most of them one number per row (the value, the
gradient's norm, the step count, the status, the solver's damping, ...). XLA:CPU emits
one kernel for each array that a loop trip or a refill writes (it has no multi-output
fusion), and each kernel costs compile time (~10-20 ms of LLVM on these machines):
selecting the refilled lanes leaf by leaf, or writing the stopped rows out leaf by
leaf, costs a kernel per leaf. Stacked, the scalars of one dtype are selected or
written by one kernel. Stacking moves data only: the values are the same bits.

Leaves with more than one number per row (the point, the gradient, a normal matrix, an
L-BFGS history that is updated one slot at a time in place) stay as they are: stacked,
they would be copied whole on every trip, and they cost more kernels, not fewer (an
array that other kernels read is written anyway), measured; they also changed the
rounding of L-BFGS steps (other fusions of the reductions that read them). The rows'
results, written once and never read by the loop, pack their vectors too
(``vectors=True``).

With ``minor`` (a TPU's lanes: ``fixedopt._numerics.backends.Backend.minor_rows``) the
leaves kept as they are hold their rows on the last axis, ``(..., rows)``, and every
array is carried flattened to one axis: a TPU tiles an array's two minor axes by
``(8, 128)``, and a loop carry of ``(rows, 8)`` rows padded each row's 8 entries to
128, transposed on every trip to the rows-minor layouts XLA chose inside the step;
carried ``(8, rows)``, XLA's layout assignment laid it out as before (a transpose is
free to it). One axis leaves it no layout to choose (docs/decisions.md, "Rows on a
TPU's minor axis").
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._inputs import arrays

Tree = Any  # a pytree of arrays, every leaf with the leading axis of rows
Packed = tuple[jax.Array, ...]  # a tree packed by its Packing: packed arrays, then kept leaves


@dataclasses.dataclass(frozen=True)
class Packing:
    """Where each leaf of a tree lives once packed (static: shapes and dtypes only).

    ``place[i]`` is ``(group, start)`` for the ``i``-th leaf, held in the columns from
    ``start`` on of the packed array ``group``, or ``None`` for a leaf kept as it is.
    (A column is a row of the array when scalars only are packed: see :meth:`of`.)
    """

    treedef: Any
    leaves: tuple[jax.ShapeDtypeStruct, ...]  # each leaf's shape per row, and dtype
    place: tuple[tuple[int, int] | None, ...]
    groups: tuple[tuple[Any, int], ...]  # (dtype, columns) of each packed array
    vectors: bool  # packed arrays are (rows, columns); else (columns, rows): see of()
    minor: bool = False  # kept leaves hold their rows last, every array flattened

    @classmethod
    def of(cls, tree: Tree, vectors: bool = False, minor: bool = False) -> Packing:
        """The packing of ``tree`` (arrays or ``jax.ShapeDtypeStruct``, rows first).

        Its scalars per row are packed as ``(columns, rows)`` arrays: each leaf stays
        contiguous (a kernel that reads one leaf reads no other's bytes, and an
        accelerator's reads of it coalesce). With ``vectors``, its vectors too, as
        ``(rows, columns)`` arrays: a row's entries are contiguous, for writing rows.
        With ``minor``, the leaves kept as they are hold their rows on the last axis,
        and every array is carried flattened (:meth:`_flat`).
        """
        leaves, treedef = jax.tree.flatten(tree)
        columns: dict[Any, int] = {}
        place: list[tuple[int, int] | None] = []
        for leaf in leaves:
            dtype = np.dtype(leaf.dtype)
            if leaf.ndim != 1 and not (vectors and leaf.ndim == 2):
                place.append(None)
                continue
            group = list(columns).index(dtype) if dtype in columns else len(columns)
            place.append((group, columns.get(dtype, 0)))
            columns[dtype] = columns.get(dtype, 0) + math.prod(leaf.shape[1:])
        shapes = tuple(arrays.one_row(leaf) for leaf in leaves)
        return cls(treedef, shapes, tuple(place), tuple(columns.items()), vectors, minor)

    def pack(self, tree: Tree) -> Packed:
        """``tree`` as its packed arrays, then the leaves kept as they are, in order."""
        leaves = self.treedef.flatten_up_to(tree)
        parts: list[list[jax.Array]] = [[] for _ in self.groups]
        kept = []
        for leaf, place in zip(leaves, self.place):
            if place is None:
                kept.append(jnp.moveaxis(leaf, 0, -1) if self.minor else leaf)
            elif self.vectors:
                parts[place[0]].append(
                    jnp.reshape(leaf, (leaf.shape[0], math.prod(leaf.shape[1:])))
                )
            else:
                parts[place[0]].append(leaf[None])
        packed = (jnp.concatenate(part, axis=1 if self.vectors else 0) for part in parts)
        return self._flat((*packed, *kept))

    def unpack(self, arrays: Packed) -> Tree:
        """The tree that :meth:`pack` packed into ``arrays``."""
        arrays = self._shaped(arrays)
        packed, kept = arrays[: len(self.groups)], iter(arrays[len(self.groups) :])
        leaves = []
        for leaf, place in zip(self.leaves, self.place):
            if place is None:
                leaf_rows = next(kept)
                leaves.append(jnp.moveaxis(leaf_rows, -1, 0) if self.minor else leaf_rows)
                continue
            group, start = place
            if not self.vectors:
                leaves.append(packed[group][start])
                continue
            block = packed[group][:, start : start + math.prod(leaf.shape)]
            leaves.append(block.reshape(block.shape[0], *leaf.shape))
        return jax.tree.unflatten(self.treedef, leaves)

    def take(self, arrays: Packed, index: jax.Array) -> Packed:
        """The rows ``index`` (a ``(k,)`` int array, in range) of packed ``arrays``."""
        return self._flat(tuple(a[..., index] if self._last(i) else a[:, index]
                                if self._across(i) else a[index]
                                for i, a in enumerate(self._shaped(arrays))))  # fmt: skip

    def put(self, arrays: Packed, index: jax.Array, rows: Packed) -> Packed:
        """``arrays`` with ``rows`` (packed, ``k`` rows) written at the rows ``index``;
        an index out of range drops its row."""
        written = []
        for i, (a, r) in enumerate(zip(self._shaped(arrays), self._shaped(rows))):
            at = (
                a.at[..., index]
                if self._last(i)
                else a.at[:, index]
                if self._across(i)
                else a.at[index]
            )
            written.append(at.set(r, mode="drop"))
        return self._flat(tuple(written))

    def _flat(self, arrays: Packed) -> Packed:
        """``arrays`` as carried: each flattened to one axis where ``minor``, so that no
        compiler lays a row's entries on the minor axis (its rows are last: the entries
        of one leaf's column for every row, then the next)."""
        return tuple(a.reshape(-1) for a in arrays) if self.minor else arrays

    def _shaped(self, arrays: Packed) -> Packed:
        """``arrays`` as :meth:`_flat` carries them, in their shapes again."""
        if not self.minor:
            return arrays
        kept = (leaf.shape for leaf, place in zip(self.leaves, self.place) if place is None)
        shapes = [*((columns,) for _, columns in self.groups), *kept]
        return tuple(a.reshape(*shape, -1) for a, shape in zip(arrays, shapes))

    def _across(self, i: int) -> bool:
        """Whether the ``i``-th packed array holds its rows along axis 1."""
        return i < len(self.groups) and not self.vectors

    def _last(self, i: int) -> bool:
        """Whether the ``i``-th array is a leaf kept as it is, its rows last (``minor``)."""
        return self.minor and i >= len(self.groups)

    def zeros(self, rows: int) -> Packed:
        """Packed arrays of ``rows`` rows of zeros, as :meth:`pack` makes them."""
        packed = [jnp.zeros((rows, columns) if self.vectors else (columns, rows), dtype)
                  for dtype, columns in self.groups]  # fmt: skip
        kept = [jnp.zeros((*leaf.shape, rows) if self.minor else (rows, *leaf.shape), leaf.dtype)
                for leaf, place in zip(self.leaves, self.place) if place is None]  # fmt: skip
        return self._flat((*packed, *kept))

    def columns(self, flags: Tree) -> tuple[Any, ...]:
        """Which entries of the packed arrays belong to leaves flagged True in ``flags``
        (a tree like the packed one, one bool per leaf): per packed array a ``(columns,)``
        NumPy mask, or None where none is flagged; per leaf kept as is, True or None."""
        masks = [np.zeros(columns, bool) for _, columns in self.groups]
        kept: list[bool | None] = []
        flagged = self.treedef.flatten_up_to(flags)
        for flag, leaf, place in zip(flagged, self.leaves, self.place):
            if place is None:
                kept.append(True if flag else None)
            elif flag:
                group, start = place
                masks[group][start : start + math.prod(leaf.shape)] = True
        return (*(mask if mask.any() else None for mask in masks), *kept)

    def select(
        self, rows: jax.Array, new: Packed, old: Packed, always: tuple[Any, ...] = ()
    ) -> Packed:
        """``new`` in the given ``rows`` (a ``(rows,)`` mask), ``old`` in the others,
        array by array; the entries flagged in ``always`` (from :meth:`columns`) take
        ``new`` in every row."""
        flags = always or (None,) * len(new)
        picked = []
        for i, (a, b, flag) in enumerate(zip(self._shaped(new), self._shaped(old), flags)):
            packed = i < len(self.groups)
            if flag is True:
                picked.append(a)
                continue
            row_axis = 1 if packed and not self.vectors else 0
            row_axis = a.ndim - 1 if self._last(i) else row_axis
            shape = [1] * a.ndim
            shape[row_axis] = rows.shape[0]
            chosen = rows.reshape(shape)
            if flag is not None:  # a (columns,) mask of a packed array
                chosen = chosen | jnp.asarray(flag).reshape((1, -1) if self.vectors else (-1, 1))
            picked.append(jnp.where(chosen, a, b))
        return self._flat(tuple(picked))
