"""Strict settings for the whole suite (tests and doctests): float64 available, no
implicit rank promotion."""

import os

# One OpenBLAS thread per LAPACK call, set before NumPy loads (the notebook kernels
# inherit it). jaxlib 0.10's CPU LAPACK kernels spread a batch over XLA's thread pool
# and every call may also start OpenBLAS threads; on a 2-core machine the nesting hung
# once in CI (notebook 03's covariance cell, after scipy had started OpenBLAS's
# threads). jax-ml/jax#39292 reports the same nesting; its fix (#39383) sets this too.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jax
import pytest

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after each test module. The suite compiles
    thousands of programs, and a module alone adds up to ~15,000 memory mappings
    (measured); kept alive across the suite they approach the per-process limit
    (vm.max_map_count, 65530 here). Without this, XLA's compiler segfaulted late in
    the suite (twice, at the same test); with it the suite runs through."""
    yield
    jax.clear_caches()
