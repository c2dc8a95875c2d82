"""A compile ahead held (``fixedopt._driver.ahead.held``): within the block nothing of it
runs; the call that needs it runs it in its own thread (export and mark as the thread's
would be); one that no call needed goes to fixedopt's thread when the block ends. Its
program's results are those of the same program compiled ahead at once."""

import threading

import jax
import jax.numpy as jnp
import pytest

from fixedopt._driver import ahead
from tests.helpers import persistent_cache

pytestmark = pytest.mark.compiles_ahead  # the thread on, as for a user (conftest.py)


def block(offset):
    """A block's lowered program (its text names the tail's mark)."""
    return lambda: jax.jit(lambda x: x + offset).lower(jnp.ones(3))


@pytest.fixture
def tail():
    """A tail's ``jit`` function (its first argument static) and the names of the threads
    that traced it, in order; the thread's state forgotten after."""
    traced: list[str] = []

    def doubled(static, inputs):
        traced.append(threading.current_thread().name)
        return {"x": inputs["x"] * 2.0}

    program = jax.jit(doubled, static_argnums=0)
    ahead.register(program, None)
    yield program, traced
    ahead.settle()
    ahead.forget()


def marks(folder):
    return sorted((folder / ahead.TAILS).iterdir()) if (folder / ahead.TAILS).exists() else []


def test_a_held_compile_that_a_call_needs_runs_in_the_callers_thread(tail, tmp_path):
    program, traced = tail
    inputs = {"x": jnp.arange(3.0)}
    with persistent_cache(tmp_path), ahead.held():
        assert ahead.start(block(1.0), program, "needed", inputs, export=True)
        assert not ahead.start(block(1.0), program, "needed", inputs, export=True)
        assert traced == [] and marks(tmp_path) == [], "held: nothing of it ran"
        result = ahead.call(program, "needed", inputs, like=inputs)
        assert traced == [threading.current_thread().name]
        assert len(marks(tmp_path)) == 1 and marks(tmp_path)[0].stat().st_size > 0
    assert result["x"].tolist() == [0.0, 2.0, 4.0]
    ahead.settle()
    assert len(traced) == 1, "run once: not again when the block ends"


def test_a_held_compile_no_call_needs_goes_to_the_thread_when_the_block_ends(tail, tmp_path):
    program, traced = tail
    inputs = {"x": jnp.arange(3.0)}
    with persistent_cache(tmp_path):
        with ahead.held():
            assert ahead.start(block(2.0), program, "later", inputs, export=True)
            with ahead.held():  # an enclosing block holds it: not submitted here
                assert ahead.start(block(3.0), program, "inner", inputs, export=True)
            assert traced == [] and marks(tmp_path) == []
        ahead.settle()
        assert len(traced) == 2 and all(name.startswith("fixedopt-ahead") for name in traced)
        assert len(marks(tmp_path)) == 2  # what a new process reads
        result = ahead.call(program, "later", inputs, like=inputs)  # its export: no trace
    assert len(traced) == 2
    assert result["x"].tolist() == [0.0, 2.0, 4.0]


def test_a_compile_started_outside_a_held_block_goes_to_the_thread_at_once(tail):
    program, traced = tail
    inputs = {"x": jnp.arange(3.0)}
    assert ahead.start(block(4.0), program, "now", inputs, export=True)
    ahead.wait(program, "now", inputs)
    assert len(traced) == 1 and traced[0].startswith("fixedopt-ahead")
