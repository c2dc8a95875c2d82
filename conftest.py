"""Strict settings for the whole suite (tests and doctests): float64 available, no
implicit rank promotion."""

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")
