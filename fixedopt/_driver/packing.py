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
(``vectors=True``), and every dtype as 32-bit words (``words=True``, where no entry is
wider): one array, so one scatter writes a refill's rows out (XLA:CPU may expand each
scatter into a loop of its own kernels). A word holds one entry's bits: moved, never
computed with, unpacked to the same bits. (Results with 64-bit entries stay one array
per dtype: as 64-bit words they moved the rounding of float64 solves with bounds,
measured, docs/decisions.md.)

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
    words: bool = False  # every leaf packed as 32-bit words, one array (vectors too)

    @classmethod
    def of(
        cls, tree: Tree, vectors: bool = False, minor: bool = False, words: bool = False
    ) -> Packing:
        """The packing of ``tree`` (arrays or ``jax.ShapeDtypeStruct``, rows first).

        Its scalars per row are packed as ``(columns, rows)`` arrays: each leaf stays
        contiguous (a kernel that reads one leaf reads no other's bytes, and an
        accelerator's reads of it coalesce). With ``vectors``, its vectors too, as
        ``(rows, columns)`` arrays: a row's entries are contiguous, for writing rows.
        With ``minor``, the leaves kept as they are hold their rows on the last axis,
        and every array is carried flattened (:meth:`_flat`). With ``words``, every leaf
        as uint32 words in one ``(rows, words)`` array where no entry is wider than 32
        bits (else as with ``vectors``).
        """
        leaves, treedef = jax.tree.flatten(tree)
        shapes = tuple(arrays.one_row(leaf) for leaf in leaves)
        if words and all(np.dtype(leaf.dtype).itemsize <= 4 for leaf in shapes):
            word_place, count = _word_places(shapes)
            return cls(treedef, shapes, word_place, ((np.dtype(np.uint32), count),), True,
                       minor, True)  # fmt: skip
        vectors = vectors or words
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
        return cls(treedef, shapes, tuple(place), tuple(columns.items()), vectors, minor)

    def pack(self, tree: Tree) -> Packed:
        """``tree`` as its packed arrays, then the leaves kept as they are, in order."""
        leaves = self.treedef.flatten_up_to(tree)
        if self.words:
            return (_packed_words(leaves, self.groups[0][0]),)
        parts: list[list[jax.Array]] = [[] for _ in self.groups]
        kept = []
        for leaf, place in zip(leaves, self.place):
            if place is None:
                kept.append(jnp.moveaxis(leaf, 0, -1) if self.minor else leaf)
            elif self.vectors:
                parts[place[0]].append(_flat_rows(leaf))
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
            block = _from_words(block, leaf.dtype) if self.words else block
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


def _flat_rows(leaf: jax.Array) -> jax.Array:
    """``leaf`` as ``(rows, entries)``."""
    return jnp.reshape(leaf, (leaf.shape[0], math.prod(leaf.shape[1:])))


def _dtypes(leaves: Any) -> list[np.dtype[Any]]:
    """The leaves' dtypes, each once, in order of first appearance."""
    return list(dict.fromkeys(np.dtype(leaf.dtype) for leaf in leaves))


def _word_places(
    leaves: tuple[jax.ShapeDtypeStruct, ...],
) -> tuple[tuple[tuple[int, int], ...], int]:
    """Each leaf's ``(0, first word)`` in :meth:`Packing.of`'s ``words`` array (the
    leaves of a dtype side by side, dtypes in order of first appearance), and the words."""
    starts: dict[int, int] = {}
    count = 0
    for dtype in _dtypes(leaves):
        for i, leaf in enumerate(leaves):
            if np.dtype(leaf.dtype) == dtype:
                starts[i], count = count, count + math.prod(leaf.shape)
    return tuple((0, starts[i]) for i in range(len(leaves))), count


def _packed_words(leaves: list[jax.Array], word: Any) -> jax.Array:
    """``leaves`` as one ``(rows, words)`` array of ``word`` (:func:`_word_places`): the
    leaves of each dtype concatenated, then turned into words, one conversion per dtype."""
    blocks = []
    for dtype in _dtypes(leaves):
        same = [_flat_rows(leaf) for leaf in leaves if np.dtype(leaf.dtype) == dtype]
        blocks.append(_to_words(jnp.concatenate(same, axis=1), word))
    return jnp.concatenate(blocks, axis=1)


def _to_words(block: jax.Array, word: Any) -> jax.Array:
    """``block`` as ``word``s, one per entry: the entry's bits, widened where narrower
    (a bool's 0 or 1)."""
    if block.dtype == np.bool_:
        return block.astype(word)
    same = jax.lax.bitcast_convert_type(block, np.dtype(f"uint{8 * block.dtype.itemsize}"))
    return same.astype(word)


def _from_words(words: jax.Array, dtype: Any) -> jax.Array:
    """The block of ``dtype`` that :func:`_to_words` made ``words`` of."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return words.astype(jnp.bool_)
    same = words.astype(np.dtype(f"uint{8 * dtype.itemsize}"))
    return jax.lax.bitcast_convert_type(same, dtype)
