"""No backend-specific speed trick: the solve lowered for CUDA, ROCm or TPU has the
same structure as the one lowered for the CPU.

A trick tuned on one backend must never run on another (a CPU cache trick that ran
the L-BFGS recursion a few rows at a time serialized the batch on a GPU, and later
slowed the CPU too; it is gone). ``jax.export`` lowers for a platform without its
hardware, so this check runs on a CPU-only machine.
"""

import re

import jax
import jax.numpy as jnp
import pytest

import fixedopt

BATCH, N = 32, 256


def weighted_quadratic(x, target):
    return 0.5 * jnp.sum(jnp.arange(1.0, N + 1.0) * (x - target) ** 2)


def batched_solve(x0, fixed, target):
    return fixedopt.minimize(weighted_quadratic, x0, fixed, args=(target,), batched=True).x


def lowered_text(platform: str) -> str:
    args = (jnp.zeros((BATCH, N)), jnp.zeros((BATCH, N), bool), jnp.ones((BATCH, N)))
    exported = jax.export.export(jax.jit(batched_solve), platforms=[platform])(*args)
    return exported.mlir_module()


def structure(text: str) -> dict[str, int]:
    """How many loops, conditionals and calls the program has, JAX's own lowerings
    apart: from jax 0.11 a cumulative sum is a ``chlo.scan`` composite on CUDA and ROCm
    (a reduce-window on the CPU), with a loop as its decomposition for a compiler that
    does not implement the composite. That loop is JAX's, not a trick of fixedopt's."""
    functions = re.split(r"\n(?=\s*func\.func )", text)
    own = "\n".join(f for f in functions if not re.match(r"\s*func\.func private @chlo\.", f))
    ops = ("stablehlo.while", "stablehlo.case", "stablehlo.if", "func.call", "custom_call")
    return {op: len(re.findall(re.escape(op), own)) for op in ops}


@pytest.fixture(scope="module")
def cpu_structure():
    return structure(lowered_text("cpu"))


@pytest.mark.parametrize("platform", ["cuda", "rocm", "tpu"])
def test_every_backend_gets_the_program_the_cpu_gets(cpu_structure, platform):
    # The batch's loop, the line search's, the certification's conjugate gradients,
    # and the two loops of each L-BFGS recursion: in the step and in the
    # certification's preconditioner (once, inside its conjugate gradients); and the
    # halving search that leaves a point shown no minimum (fixedopt._driver.leave_start).
    assert cpu_structure["stablehlo.while"] == 3 + 2 * 2 + 1
    assert structure(lowered_text(platform)) == cpu_structure
