"""CPU-only tricks stay on the CPU: the program lowered for CUDA or TPU is plain.

The L-BFGS recursion runs a few rows at a time (``lax.map``) on the CPU so a row's
history stays in cache; on a GPU that loop over chunks would serialize the batch.
``jax.export`` lowers for a platform without needing its hardware, so these checks
run on a CPU-only machine.
"""

import re

import jax
import jax.numpy as jnp
import pytest

import fixedopt
from fixedopt._solvers.lbfgs import CHUNKED_FROM, ROWS_PER_CHUNK

BATCH, N = 2 * ROWS_PER_CHUNK, CHUNKED_FROM  # two chunks of rows on the CPU
CHUNKED_SHAPE = f"2x{ROWS_PER_CHUNK}x{N}xf64"  # the per-chunk slices lax.map walks


def weighted_quadratic(x, target):
    return 0.5 * jnp.sum(jnp.arange(1.0, N + 1.0) * (x - target) ** 2)


def batched_solve(x0, fixed, target):
    return fixedopt.minimize(weighted_quadratic, x0, fixed, args=(target,), batched=True).x


def lowered_text(platform: str) -> str:
    args = (jnp.zeros((BATCH, N)), jnp.zeros((BATCH, N), bool), jnp.ones((BATCH, N)))
    exported = jax.export.export(jax.jit(batched_solve), platforms=[platform])(*args)
    return exported.mlir_module()


def loops(text: str) -> int:
    return len(re.findall(r"stablehlo\.while", text))


@pytest.fixture(scope="module")
def cpu_text():
    return lowered_text("cpu")


def test_cpu_lowering_runs_the_recursion_by_chunks(cpu_text):
    assert CHUNKED_SHAPE in cpu_text


@pytest.mark.parametrize("platform", ["cuda", "rocm", "tpu"])
def test_accelerator_lowering_has_no_loop_over_chunks(cpu_text, platform):
    text = lowered_text(platform)
    assert CHUNKED_SHAPE not in text
    # Same program otherwise: the solve's loop and the line search's loop, and on the
    # CPU one more, the loop over chunks around the recursion.
    assert loops(text) == loops(cpu_text) - 1
