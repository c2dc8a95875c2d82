"""Strict settings for the whole suite (tests and doctests): float64 available, no
implicit rank promotion."""

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
