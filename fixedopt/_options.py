"""The options of one ``minimize`` / ``least_squares`` call, validated together.

``minimize`` and ``least_squares`` keep their explicit keyword signatures and hand
every option to :func:`solve_options` by keyword, which validates each one and the
combinations, and returns one :class:`Options`. From it come the compiled program's
static :class:`~fixedopt._engine.Plan` and the traced stopping rules.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from fixedopt._arguments import choice, max_steps_option, tolerance
from fixedopt._differentiation import Differentiation, differentiation_option
from fixedopt._engine import Plan
from fixedopt._loop import Stopping
from fixedopt._losses import Loss
from fixedopt._progress import Progress, progress_option
from fixedopt._validate import PyTree

STRATEGIES = ("mask", "split")


class Tolerances(NamedTuple):
    """The tolerances as given (each validated); ``None`` takes the dtype's default."""

    gtol: float | jax.Array | None
    ftol: float | jax.Array | None
    xtol: float | jax.Array | None
    abs_gtol: float | jax.Array


class Options(NamedTuple):
    """Every option of a solve but the problem's data, validated (see
    :func:`solve_options`; the meaning of each is in ``fixedopt.minimize``)."""

    least_squares: bool | Loss  # False for minimize; the robust Loss or True otherwise
    batched: bool
    args_axes: Any
    strategy: str
    differentiate: Differentiation
    tolerances: Tolerances
    max_steps: int
    lanes: int | None
    progress: Progress | None
    vectorized: bool

    def plan(self, batch: int, batched_args: tuple[bool, ...] | None) -> Plan:
        """The static choices of the compiled program, for a batch of ``batch`` rows."""
        return Plan(
            least_squares=self.least_squares,
            batched_args=batched_args,
            lanes=None if self.lanes is None else min(self.lanes, batch),
            backend=jax.default_backend(),
            vectorized=self.vectorized,
            differentiate=self.differentiate,
            max_trips=self.differentiate.static_max_steps(self.max_steps),
            progress=self.progress,
        )

    def stopping(self, x0: PyTree) -> Stopping:
        """The traced stopping rules, with defaults from the dtype of ``x0``.

        ``gtol`` and ``xtol`` default to ``sqrt(eps)``: both tests are linear in the
        distance to the solution, so they ask for about half the digits of the dtype.
        ``ftol`` compares reductions of ``f``, quadratic in that distance: it defaults
        to ``eps`` (a reduction at the rounding level of ``f``), which asks for the
        same digits. (MINPACK's ``sqrt(eps)`` for ``ftol`` stops least-squares fits
        in float32 with 1-2 correct digits on ill-conditioned problems.)
        """
        dtype = jnp.result_type(*jax.tree.leaves(x0))
        eps = float(jnp.finfo(dtype).eps)
        precision = math.sqrt(eps)
        gtol, ftol, xtol, abs_gtol = self.tolerances

        def as_array(value: float | jax.Array | None, default: float) -> jax.Array:
            return jnp.asarray(default if value is None else value, dtype)

        return Stopping(
            gtol=as_array(gtol, precision),
            ftol=as_array(ftol, eps),
            xtol=as_array(xtol, precision),
            abs_gtol=as_array(abs_gtol, 0.0),
            max_steps=jnp.asarray(self.max_steps, jnp.int32),
            precision=as_array(precision, precision),
        )


def solve_options(
    *,
    least_squares: bool | Loss,
    batched: bool,
    args_axes: Any,
    strategy: str,
    differentiate: object,
    gtol: Any,
    ftol: Any,
    xtol: Any,
    abs_gtol: Any,
    max_steps: Any,
    lanes: int | None,
    progress: bool | int | str,
    vectorized: bool = False,
) -> Options:
    """The validated :class:`Options`; options that would be silently ignored raise.

    ``args_axes``, ``lanes``, ``progress`` and ``vectorized`` apply only to a batch
    (``batched=True``), and ``lanes``, ``progress`` and ``vectorized`` not to an
    unrolled solve (``differentiate="unroll"`` runs fixed-length scans over the whole
    batch, and reverse mode cannot pass a vectorized objective's batching rule).
    """
    choice("strategy", strategy, STRATEGIES)
    differentiation = differentiation_option(differentiate)
    lanes = None if lanes is None else _lanes_option(lanes)
    if not isinstance(vectorized, bool):
        raise TypeError(f"`vectorized` must be a bool, got {vectorized!r}")
    batch_only = {"args_axes": args_axes is not None, "lanes": lanes is not None}
    batch_only |= {"progress": bool(progress), "vectorized": vectorized}
    given = [name for name, set_ in batch_only.items() if set_]
    _reject(given, batched, "without batched=True")
    given = [name for name in ("lanes", "progress", "vectorized") if batch_only[name]]
    unrolled = 'with differentiate="unroll" (fixed-length scans)'
    _reject(given, differentiation.through_lanes, unrolled)
    given_tolerances = zip(Tolerances._fields, (gtol, ftol, xtol, abs_gtol))
    tolerances = Tolerances(*(tolerance(name, value) for name, value in given_tolerances))
    return Options(
        least_squares=least_squares,
        batched=batched,
        args_axes=args_axes,
        strategy=strategy,
        differentiate=differentiation,
        tolerances=tolerances,
        max_steps=max_steps_option(max_steps),
        lanes=lanes,
        progress=progress_option(progress),
        vectorized=vectorized,
    )


def _lanes_option(lanes: object) -> int:
    """``lanes`` as an int >= 1 (NumPy integers too), else ValueError."""
    if isinstance(lanes, bool) or not isinstance(lanes, numbers.Integral) or lanes < 1:
        raise ValueError(f"`lanes` must be None or an int >= 1, got {lanes!r}")
    return int(lanes)


def _reject(names: list[str], allowed: bool, why: str) -> None:
    """ValueError naming the options ``names`` unless they are ``allowed``."""
    if names and not allowed:
        given = ", ".join(f"`{name}`" for name in names)
        one = len(names) == 1
        has, it = ("has", "it") if one else ("have", "them")
        raise ValueError(f"{given} {has} no effect {why}: remove {it}")
