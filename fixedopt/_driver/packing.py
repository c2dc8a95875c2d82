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

With ``words`` (the lanes' states and reports, but a TPU's) the scalars of different
dtypes share arrays: every leaf as wide as the widest float's bits in that float's
array (or, with no float, an unsigned integer's), booleans as 0 and 1, at most
:data:`CONCATENATED` leaves to an array; a narrower number keeps its dtype's array.
The Gpufit spot's float32 state (8 floats, 5 integers, a boolean) is carried in two
arrays, not three, and its reports written as one: 7 fewer kernels (docs/decisions.md,
"The lanes' scalars in words").

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

# XLA:CPU fuses a concatenation of at most 8 arrays with their producers and the
# kernel that reads it; one of more takes a kernel per array besides (measured:
# docs/decisions.md, "The lanes' scalars in words"). Words hold at most 8 leaves an array.
CONCATENATED = 8
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
    words: bool = False  # dtypes share packed arrays, as their bits: see of()

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
        and every array is carried flattened (:meth:`_flat`). With ``words``, packed
        leaves of any dtype as wide as the word (:func:`_word_of`) and booleans share
        arrays of words, at most :data:`CONCATENATED` leaves to an array, each leaf's
        bits as they are (booleans as 0 and 1); a narrower number keeps its dtype's.
        """
        leaves, treedef = jax.tree.flatten(tree)
        word = _word_of(leaves, vectors) if words else None
        columns: dict[Any, int] = {}  # per packed array's key: its dtype, or (word, k)
        place: list[tuple[int, int] | None] = []
        for leaf in leaves:
            if not _is_packed(leaf, vectors):
                place.append(None)
                continue
            key: Any = np.dtype(leaf.dtype)
            if word is not None and _in_words(key, word):
                worded = sum(isinstance(k, tuple) for k in columns)
                key = (word, worded - 1)
                if worded == 0 or _leaves_in(place, key, columns) == CONCATENATED:
                    key = (word, worded)
            group = list(columns).index(key) if key in columns else len(columns)
            place.append((group, columns.get(key, 0)))
            columns[key] = columns.get(key, 0) + math.prod(leaf.shape[1:])
        shapes = tuple(arrays.one_row(leaf) for leaf in leaves)
        groups = tuple((k[0] if isinstance(k, tuple) else k, n) for k, n in columns.items())
        return cls(treedef, shapes, tuple(place), groups, vectors, minor, word is not None)

    def pack(self, tree: Tree) -> Packed:
        """``tree`` as its packed arrays, then the leaves kept as they are, in order."""
        leaves = self.treedef.flatten_up_to(tree)
        parts: list[list[jax.Array]] = [[] for _ in self.groups]
        kept = []
        for leaf, place in zip(leaves, self.place):
            if place is None:
                kept.append(jnp.moveaxis(leaf, 0, -1) if self.minor else leaf)
                continue
            leaf = _to_word(leaf, self.groups[place[0]][0]) if self.words else leaf
            if self.vectors:
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
                block = packed[group][start]
            else:
                block = packed[group][:, start : start + math.prod(leaf.shape)]
                block = block.reshape(block.shape[0], *leaf.shape)
            leaves.append(_from_word(block, leaf.dtype) if self.words else block)
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


def _is_packed(leaf: Any, vectors: bool) -> bool:
    """Whether :meth:`Packing.of` packs ``leaf`` (rows first): a scalar per row, or
    with ``vectors`` a vector."""
    return bool(leaf.ndim == 1 or (vectors and leaf.ndim == 2))


def _leaves_in(place: list[tuple[int, int] | None], key: Any, columns: dict[Any, int]) -> int:
    """How many of the leaves placed so far went to the packed array of ``key``."""
    group = list(columns).index(key)
    return sum(p is not None and p[0] == group for p in place)


def _in_words(dtype: np.dtype[Any], word: np.dtype[Any] | None = None) -> bool:
    """Whether a leaf of ``dtype`` goes into arrays of ``word``s (any width where
    None): booleans, and integers and real floats as wide. A narrower number keeps its
    dtype's array: widened, its bits cost kernels where the array is written (measured,
    the integers of a float64 solve's reports)."""
    if dtype == np.bool_:
        return True
    number = jnp.issubdtype(dtype, jnp.integer) or jnp.issubdtype(dtype, jnp.floating)
    return number and (word is None or dtype.itemsize == word.itemsize)


def _word_of(leaves: list[Any], vectors: bool) -> np.dtype[Any] | None:
    """The dtype of a packing's words: that of the widest float among the packed
    leaves of ``leaves`` (:meth:`Packing.of`'s test), whose leaves then go in as they
    are (a float vector's bits cast again cost a kernel where a float64 solve's reports
    are written, measured); else an unsigned integer as wide as the widest of them.
    None where none is packed."""
    dtypes = (np.dtype(leaf.dtype) for leaf in leaves if _is_packed(leaf, vectors))
    packed = [dtype for dtype in dtypes if _in_words(dtype)]
    if not packed:
        return None
    widest = max(dtype.itemsize for dtype in packed)
    floats = [d for d in packed if jnp.issubdtype(d, jnp.floating) and d.itemsize == widest]
    return floats[0] if floats else np.dtype(f"uint{8 * widest}")


def _to_word(leaf: jax.Array, word: Any) -> jax.Array:
    """``leaf``'s bits as its packed array's ``word`` dtype (booleans: 0 and 1); a leaf
    of that dtype, or in its own dtype's array (:func:`_in_words`), as it is."""
    dtype = np.dtype(leaf.dtype)
    if dtype == np.dtype(word):
        return leaf
    if dtype == np.bool_:
        return leaf.astype(word)
    return jax.lax.bitcast_convert_type(leaf, word)


def _from_word(block: jax.Array, dtype: Any) -> jax.Array:
    """The ``dtype`` values whose bits :func:`_to_word` put in ``block``."""
    if np.dtype(dtype) == np.dtype(block.dtype):
        return block
    if np.dtype(dtype) == np.bool_:
        return block != 0
    return jax.lax.bitcast_convert_type(block, dtype)
