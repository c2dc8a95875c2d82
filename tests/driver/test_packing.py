"""Packing a tree's per-row scalars into one array per dtype (``fixedopt._driver.packing``),
or every leaf into one array of words: unpack gives back the same bits, shapes and
dtypes; the column masks flag the right entries; empty batches work."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fixedopt._driver.packing import Packing
from tests.helpers import bits


def tree(rows):
    rng = np.random.default_rng(0)
    return {
        "x": jnp.asarray(rng.normal(size=(rows, 3)), jnp.float32),
        "value": jnp.asarray(rng.normal(size=rows), jnp.float32),
        "steps": jnp.arange(rows, dtype=jnp.int32),
        "status": -jnp.arange(rows, dtype=jnp.int32),
        "matrix": jnp.asarray(rng.normal(size=(rows, 2, 2)), jnp.float32),
        "flag": jnp.arange(rows) % 2 == 0,
        "small": jnp.full(rows, -0.0, jnp.bfloat16),
    }


def wide_tree(rows):
    """:func:`tree` with NaNs and a 64-bit leaf (a float64 solve's results)."""
    rng = np.random.default_rng(1)
    return {**tree(rows), "wide": jnp.asarray(rng.normal(size=(rows, 2)), jnp.float64),
            "nan": jnp.full((rows,), jnp.nan, jnp.float32).at[1:].set(-jnp.nan)}  # fmt: skip


@pytest.mark.parametrize(
    ("vectors", "minor", "words"),
    [
        (False, False, False),
        (True, False, False),
        (False, True, False),
        (True, False, True),
        (False, False, True),
    ],
)
@pytest.mark.parametrize("rows", [0, 1, 5])
def test_unpack_gives_back_the_same_bits(rows, vectors, minor, words):
    original = wide_tree(rows) if vectors else tree(rows)
    packing = Packing.of(original, vectors=vectors, minor=minor, words=words)
    packed = packing.pack(original)
    restored = packing.unpack(packed)
    assert jax.tree.structure(restored) == jax.tree.structure(original)
    for mine, theirs in zip(jax.tree.leaves(restored), jax.tree.leaves(original)):
        assert mine.shape == theirs.shape and mine.dtype == theirs.dtype
        np.testing.assert_array_equal(bits(mine), bits(theirs))
    zeros = packing.zeros(rows)
    assert [(a.shape, a.dtype) for a in zeros] == [(a.shape, a.dtype) for a in packed]


def test_scalars_are_packed_per_dtype_and_the_rest_kept():
    packing = Packing.of(tree(4))
    packed = packing.pack(tree(4))
    # In the tree's (sorted) leaf order: flag; matrix (kept); small; status, steps;
    # value; x (kept). One packed array per dtype, in order of first appearance, a
    # leaf per row (each leaf contiguous); then the kept leaves as they are.
    assert [(a.shape, a.dtype) for a in packed] == [
        ((1, 4), jnp.bool_), ((1, 4), jnp.bfloat16), ((2, 4), jnp.int32), ((1, 4), jnp.float32),
        ((4, 2, 2), jnp.float32), ((4, 3), jnp.float32),
    ]  # fmt: skip
    with_vectors = Packing.of(tree(4), vectors=True).pack(tree(4))
    assert with_vectors[3].shape == (4, 4)  # a row per row: the value and x's 3 entries


def test_words_pack_every_leaf_into_one_array_of_32_bit_words():
    """``words``: one ``(rows, entries)`` uint32 array, the leaves of a dtype side by
    side; with a 64-bit leaf, one array per dtype (as ``vectors``)."""
    words = Packing.of(tree(4), words=True)
    assert [(a.shape, a.dtype) for a in words.pack(tree(4))] == [((4, 12), jnp.uint32)]
    assert words.place[-1] == (0, 6)  # x (sorted last): after flag (bool), matrix, value
    wide = Packing.of(wide_tree(4), words=True)
    assert not wide.words and wide.vectors
    assert jnp.float64 in [a.dtype for a in wide.pack(wide_tree(4))]


def test_column_masks_flag_the_leaves_asked_for():
    packing = Packing.of(tree(4))
    flags = {key: key in ("status", "matrix") for key in tree(4)}
    masks = packing.columns(flags)
    assert masks[0] is None and masks[1] is None and masks[3] is None  # none flagged
    np.testing.assert_array_equal(masks[2], [True, False])  # status, steps
    assert masks[4] is True and masks[5] is None  # the matrix flagged, x not


@pytest.mark.parametrize(("vectors", "minor"), [(False, False), (True, False), (False, True)])
def test_select_takes_new_rows_and_the_flagged_leaves_everywhere(vectors, minor):
    old, new = tree(5), jax.tree.map(lambda a: ~a if a.dtype == bool else a + 1, tree(5))
    packing = Packing.of(old, vectors=vectors, minor=minor)
    rows = jnp.array([True, False, True, False, False])
    flags = {key: key in ("status", "matrix") for key in old}
    always = packing.columns(flags)
    picked = packing.unpack(packing.select(rows, packing.pack(new), packing.pack(old), always))
    for key in old:
        expected = (
            new[key]
            if flags[key]
            else jnp.where(rows.reshape(-1, *(1,) * (old[key].ndim - 1)), new[key], old[key])
        )
        np.testing.assert_array_equal(bits(picked[key]), bits(expected), err_msg=key)


def test_rows_last_hold_the_kept_leaves_rows_on_their_last_axis():
    """``minor`` (a TPU's lanes): the kept leaves are ``(..., rows)``, the packed
    scalars ``(columns, rows)`` as without it, each array flattened: a column of the
    rows, then the next."""
    packed = Packing.of(tree(4), minor=True).pack(tree(4))
    assert [a.shape for a in packed] == [(4,), (4,), (8,), (4,), (16,), (12,)]
    np.testing.assert_array_equal(packed[5], tree(4)["x"].T.reshape(-1))
    np.testing.assert_array_equal(packed[2], jnp.concatenate([tree(4)["status"], tree(4)["steps"]]))


@pytest.mark.parametrize(("vectors", "minor"), [(False, False), (True, False), (False, True)])
def test_take_and_put_move_whole_rows(vectors, minor):
    """``take`` gives the rows asked for, as packed; ``put`` writes them at those rows
    and drops an index out of range."""
    old, new = tree(5), jax.tree.map(lambda a: ~a if a.dtype == bool else a + 1, tree(5))
    packing = Packing.of(old, vectors=vectors, minor=minor)
    index = jnp.array([3, 0])
    taken = packing.unpack(packing.take(packing.pack(new), index))
    for key in old:
        np.testing.assert_array_equal(bits(taken[key]), bits(new[key][index]), err_msg=key)
    rows = packing.take(packing.pack(new), jnp.array([3, 0, 1]))
    written = packing.put(packing.pack(old), jnp.array([3, 0, 5]), rows)  # 5: dropped
    chosen = jnp.array([True, False, False, True, False])
    for key, leaf in packing.unpack(written).items():
        expected = jnp.where(chosen.reshape(-1, *(1,) * (old[key].ndim - 1)), new[key], old[key])
        np.testing.assert_array_equal(bits(leaf), bits(expected), err_msg=key)
