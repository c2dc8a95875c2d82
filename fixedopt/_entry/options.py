"""The options of one ``minimize`` / ``least_squares`` call, validated together.

``minimize`` and ``least_squares`` keep their explicit keyword signatures and hand
every option to :func:`solve_options` by keyword, which validates each one and the
combinations, and returns one :class:`Options`; the rules for each kind of value are
those of :mod:`fixedopt._inputs.checks`. It builds nothing of the solve:
``fixedopt._entry.minimize`` turns the options into the compiled program's static
``Plan`` and the traced stopping rules.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax

from fixedopt._derivatives.differentiation import Differentiation, differentiation_option
from fixedopt._driver.progress import Progress, progress_option
from fixedopt._inputs.checks import INT32_MAX, boolean, integer, one_of, tolerance
from fixedopt._objective.losses import Loss

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
    batched = boolean("batched", batched)
    one_of("strategy", strategy, STRATEGIES)
    differentiation = differentiation_option(differentiate)
    lanes_expected = "None or an int >= 1"
    lanes = None if lanes is None else integer("lanes", lanes, minimum=1, expected=lanes_expected)
    vectorized = boolean("vectorized", vectorized)
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
        max_steps=integer("max_steps", max_steps, maximum=INT32_MAX),
        lanes=lanes,
        progress=progress_option(progress),
        vectorized=vectorized,
    )


def _reject(names: list[str], allowed: bool, why: str) -> None:
    """ValueError naming the options ``names`` unless they are ``allowed``."""
    if names and not allowed:
        given = ", ".join(f"`{name}`" for name in names)
        one = len(names) == 1
        has, it = ("has", "it") if one else ("have", "them")
        raise ValueError(f"{given} {has} no effect {why}: remove {it}")
