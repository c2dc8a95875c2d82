"""The backends' tuned defaults (fixedopt._numerics.backends): one module holds every
backend's profile, and the modules below the driver that choose by machine read it for
the platform a call runs on (the default device's), so adding or changing a backend is
an edit there alone."""

import pathlib
import re

import jax
import jax.numpy as jnp
import pytest

import fixedopt
from fixedopt._numerics import backends, buckets, cpu_compiler


def test_the_platform_follows_the_default_device():
    assert backends.platform() == jax.default_backend()
    with jax.default_device(jax.devices("cpu")[0]):
        assert backends.platform() == "cpu"
        assert backends.defaults() is backends.CPU
    with jax.default_device("cpu"):
        assert backends.platform() == "cpu"


def test_each_platform_has_its_profile():
    assert backends.defaults() is backends.defaults(backends.platform())
    assert backends.defaults("tpu") is backends.TPU
    for name in ("gpu", "cuda", "rocm", "some-new-chip"):
        assert backends.defaults(name) is backends.GPU
    # The CPU's alone take XLA:CPU's options and run a batch's rows in chunks.
    assert backends.CPU.tuned_compiler and backends.CPU.chunked
    assert not (backends.GPU.tuned_compiler or backends.GPU.chunked)
    assert not (backends.TPU.tuned_compiler or backends.TPU.chunked)


def test_chunks_follow_the_profile(monkeypatch):
    """``buckets.chunks_here`` is the profile's ``chunked`` where the call runs, at the
    top level, with no weakly typed leaf."""
    here = backends.platform()
    assert buckets.chunks_here([]) == backends.defaults().chunked
    for chunked in (True, False):
        monkeypatch.setitem(backends.BACKENDS, here, backends.CPU._replace(chunked=chunked))
        assert buckets.chunks_here([jnp.zeros(3)]) == chunked
        assert not buckets.chunks_here([jnp.asarray(1.0) + 1])  # weakly typed
        assert not jax.jit(lambda: jnp.asarray(buckets.chunks_here([])))()  # traced


@pytest.mark.skipif(not cpu_compiler.accepted(), reason="this backend refuses XLA:CPU's options")
def test_the_tuned_compiler_follows_the_profile(monkeypatch):
    """``jit_for_cpu`` compiles with its options where the profile's ``tuned_compiler``
    says so, XLA's defaults elsewhere: one tiny program each way."""
    here = backends.platform()
    for tuned in (True, False):
        monkeypatch.setitem(backends.BACKENDS, here, backends.CPU._replace(tuned_compiler=tuned))
        jitted = cpu_compiler.jit_for_cpu(lambda x: x + 1, ())
        jitted(jnp.zeros(2))
        assert (jitted.tuned._cache_size(), jitted.plain._cache_size()) == (tuned, not tuned)


# A choice by backend name in code: a comparison with a platform's name or a membership
# in a literal set of them (docstring examples and device lookups are not choices).
NAMES = r"[\"'](?:cpu|gpu|tpu|cuda|rocm)[\"']"
CHOICE = re.compile(rf"(?:==|!=)\s*{NAMES}|{NAMES}\s*(?:==|!=)|\bin\s*\(?[{{\[(]\s*{NAMES}")


def test_no_module_but_the_profiles_chooses_by_backend_name():
    """The target of issue 60: a backend profile is added or changed in one module."""
    root = pathlib.Path(fixedopt.__file__).parent
    assert CHOICE.search('jax.default_backend() == "cpu"')  # the check can fail
    assert CHOICE.search('if backend in {"tpu", "gpu"}:')
    choosing = [str(path.relative_to(root)) for path in sorted(root.rglob("*.py"))
                if path.name != "backends.py" and CHOICE.search(path.read_text())]  # fmt: skip
    assert choosing == []
