"""The XLA options of fixedopt's compiled solves, per solver and backend.

XLA:CPU generates each fused kernel with one of two code generators: the MLIR fusion
emitters (jaxlib 0.10's default) or the older elemental emitter. A least-squares
solve (Levenberg–Marquardt, Gauss–Newton) compiles through the older one in 0.6 to 0.8
times the time, and runs as fast; an L-BFGS solve compiles faster too but runs 8% to 13%
slower, so ``minimize``'s solvers keep XLA's defaults (``docs/decisions.md``, "XLA:CPU's
elemental emitter for least-squares solves"). A fit's covariance, and a model fit's
derived parameters and curves, compile with them too
(:func:`fixedopt._numerics.cpu_compiler.jit_for_cpu`: 0.6x the time, as fast:
``docs/decisions.md``, "A fit's covariance with the elemental emitter"), and so does
every solver's check of CONVERGED claims after its loop (``fixedopt._driver.after_loop``:
0.63x its compile) and a CPU block's tail, ``minimize``'s too (at most two rows, its trips
launches: 0.6x its compile, ``fixedopt._driver.machine.Schedule.of_tail``). Other backends
keep XLA's defaults.

``jax.jit`` takes such options only at the top level: a solve traced inside the
caller's own ``jit``, ``vmap``, ``grad`` or ``scan`` is compiled by the caller's
``jit``, with the caller's options (see :func:`compiler_options`).
"""

from __future__ import annotations

from typing import Any

from fixedopt._contract.solver import Solver
from fixedopt._driver import machine
from fixedopt._numerics import backends
from fixedopt._numerics.trace_state import at_top_level
from fixedopt._objective.arguments import check_is_solver


def compiler_options(solver: Solver[Any], backend: str | None = None) -> dict[str, Any]:
    """The XLA options fixedopt compiles ``solver``'s solves with on ``backend``
    (default: where a call runs here: ``jax.default_device``'s platform where one is
    set, else JAX's default backend); ``{}`` where it keeps XLA's defaults.

    A solve called inside a ``jax.jit`` of your own is compiled by that ``jit``: pass
    these to it (``jax.jit`` takes them at the top level only) and the program compiles
    as fast as the solve called on its own. On the CPU, for the least-squares solvers
    (``solver.needs_residuals``: Levenberg–Marquardt, Gauss–Newton), they choose XLA's
    elemental code generator over its MLIR fusion emitters: the fit compiles in 0.6 to
    0.8 times the time and runs as fast.

    Example:
      >>> import jax
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> t = jnp.linspace(0.0, 1.0, 8)
      >>> def fit(x0, fixed):
      ...     line = lambda p: p[0] * t + p[1] - (2.0 * t + 1.0)
      ...     return fixedopt.least_squares(line, x0, fixed).x
      >>> options = fixedopt.compiler_options(fixedopt.LevenbergMarquardt())
      >>> fast = jax.jit(fit, compiler_options=options)
      >>> print(fast(jnp.zeros(2), jnp.array([False, False])).round(6))
      [2. 1.]
    """
    schedule = machine.schedule(check_is_solver(solver), None, backend or backends.platform())
    return dict(schedule.compiler_options)


def takes_options(solver: Solver[Any], backend: str) -> bool:
    """Whether a solve by ``solver`` compiled for ``backend`` from here gets
    ``cpu_compiler.CPU_OPTIONS``: where :func:`compiler_options` gives them and nothing traces
    around the call (jit refuses options on a nested program)."""
    return bool(compiler_options(solver, backend)) and at_top_level()
