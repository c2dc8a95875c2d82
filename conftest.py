"""Strict settings for the whole suite (tests and doctests): float64 available, no
implicit rank promotion."""

import jax
import pytest

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after each test module. The suite compiles
    thousands of programs; kept alive, their code mappings grow toward the kernel's
    per-process limit (vm.max_map_count, 65530 here), past which XLA's compiler
    crashed late in the suite."""
    yield
    jax.clear_caches()
