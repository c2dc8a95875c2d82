"""Programs named before their trace (fixedopt._numerics.stored): a later process runs
the stored export untraced, its results bit for bit ``jax.jit``'s; any other program,
a damaged file or no cache folder costs only a trace."""

import typing

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fixedopt._numerics import cpu_compiler, stored


class Scale(typing.NamedTuple):
    power: int


TRACES = []


def _program(rule: Scale, x: jax.Array, y: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    TRACES.append(x.shape)  # a trace, counted
    z = jnp.sum(x**rule.power, axis=-1) * y
    return z, {"root": jnp.sqrt(jnp.abs(z)), "shape": jnp.zeros(x.shape[:1], jnp.int32)}


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A cache folder of the test's own."""
    monkeypatch.setattr(stored, "cache_subfolder", lambda name: tmp_path / name)
    return tmp_path / stored.FOLDER


def _bits(tree):
    return [np.asarray(a).tobytes() for a in jax.tree.leaves(tree)]


ARGS = (Scale(3), np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3),
        np.arange(4, dtype=np.float32))  # fmt: skip


def test_a_new_process_runs_the_stored_export_untraced(folder):
    """A fresh StoredJit (a new process) reads the export: no trace of the function,
    the same results bit for bit as ``jax.jit``'s with the same options."""
    options = cpu_compiler.CPU_OPTIONS if cpu_compiler.accepted() else {}
    reference = jax.jit(_program, static_argnums=0, compiler_options=options)(*ARGS)
    TRACES.clear()
    first = stored.StoredJit(_program, (0,), options)(*ARGS)
    assert len(TRACES) == 1 and len(list(folder.iterdir())) == 1
    again = stored.StoredJit(_program, (0,), options)
    compiled = again._cache_size()  # jit's counts are shared by the jits of one function
    found = again(*ARGS)
    assert TRACES == [(4, 3)], "the stored program was traced again"
    assert jax.tree.structure(found) == jax.tree.structure(reference)
    assert _bits(found) == _bits(reference) == _bits(first)
    assert again._cache_size() == compiled + 1  # the export's program


def test_other_arguments_are_another_program(folder):
    """A new static argument or shape is traced and stored under its own name; a
    damaged file is made again."""
    program = stored.StoredJit(_program, (0,), {})
    program(*ARGS)
    TRACES.clear()
    program(Scale(2), *ARGS[1:])
    program(ARGS[0], ARGS[1][:2], ARGS[2][:2])
    assert TRACES == [(4, 3), (2, 3)] and len(list(folder.iterdir())) == 3
    for path in folder.iterdir():
        path.write_bytes(b"not a program")
    TRACES.clear()
    found = stored.StoredJit(_program, (0,), {})(*ARGS)
    assert TRACES == [(4, 3)]
    assert _bits(found) == _bits(jax.jit(_program, static_argnums=0)(*ARGS))


def test_without_a_cache_folder_it_is_jit(monkeypatch):
    monkeypatch.setattr(stored, "cache_subfolder", lambda name: None)
    own = lambda rule, x, y: _program(rule, x, y)  # a function jit has not traced
    program = stored.StoredJit(own, (0,), {})
    TRACES.clear()
    program(*ARGS)
    program(*ARGS)
    assert TRACES == [(4, 3)]
