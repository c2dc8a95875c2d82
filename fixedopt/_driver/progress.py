"""Progress of a batched solve, reported on the host: text lines or a tqdm bar.

The lanes' loop calls one of these reporters through ``jax.debug.callback`` every
``every`` steps (:func:`report_lanes`, in the compiled program); with progress off the
loop adds no callback.
A reporter receives the step, the number of rows still running, the batch size and
the largest projected gradient among the running rows, and runs on the host, so it
works under ``jax.jit``. The compiled program holds the reporter function, not a bar:
the bar lives here, on the host, opened by the first report of a solve and closed by
its last (the one with no row running).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from typing import Any, NamedTuple, SupportsFloat, SupportsInt

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._contract.status import RUNNING, busy
from fixedopt._inputs.checks import integer

DEFAULT_EVERY = 10

# A reporter's arguments arrive from ``jax.debug.callback`` as NumPy scalars (``()``
# arrays): step, rows still running, batch size (ints) and the worst gradient (a float).
Reporter = Callable[[SupportsInt, SupportsInt, SupportsInt, SupportsFloat], None]


class Progress(NamedTuple):
    """How a batched solve reports progress: every ``every`` steps, via ``report``."""

    every: int
    report: Reporter  # (step, running, total, worst) -> None, on the host


def report_lanes(
    state: Any,
    step: jax.Array,
    queued: jax.Array | int,
    total: jax.Array | int,
    progress: Progress,
    written: jax.Array | bool = False,
) -> None:
    """In the lanes' loop: every ``progress.every`` steps, a host callback reports the
    rows stopped and the worst gradient among the lanes running (``state``, a
    ``LoopState`` of the lanes, ``fixedopt._driver.loop``); not on a trip that left no
    lane running while rows are left (they wait for the next refill, or for their
    certification): it would show no running row's gradient; nor on the trip that
    only wrote the rows out (``written``: the last, after the report of all stopped)."""
    unstopped = busy(state.status)
    running = state.status == RUNNING
    left = total - queued + jnp.sum(unstopped)
    worst = jnp.max(jnp.where(running, state.grad_norm, 0.0), initial=0.0)

    def report() -> None:
        jax.debug.callback(progress.report, step, left, total, worst)

    due = (step % progress.every == 0) & jnp.any(running)
    jax.lax.cond((due | (left == 0)) & ~written, report, lambda: None)


def report_text(
    step: SupportsInt, running: SupportsInt, total: SupportsInt, worst: SupportsFloat
) -> None:
    """Print one line: rows stopped and the worst projected gradient of the rest."""
    rows = int(total)
    if int(running) == 0:
        print(f"fixedopt: all {rows} rows stopped", flush=True)
        return
    print(
        f"fixedopt: step {int(step)}: {rows - int(running)}/{rows} rows stopped, "
        f"max |projected grad| of running rows {float(worst):.2e}",
        flush=True,
    )


class _Line:
    """The host's clock of the updating line: when it was last written."""

    written: float = -float("inf")


LINE_INTERVAL = 0.5  # seconds between rewrites of the updating line: readable, cheap


def report_line(
    step: SupportsInt, running: SupportsInt, total: SupportsInt, worst: SupportsFloat
) -> None:
    """Rewrite one line (``\\r``) with the rows stopped, at most every
    :data:`LINE_INTERVAL` seconds, and end it when no row runs: ``progress=True``
    without tqdm (162,000 rows printed 115 lines before). The worst gradient is left
    out: it jumps as lanes take new rows."""
    rows, left = int(total), int(running)
    now = time.monotonic()
    if left and now - _Line.written < LINE_INTERVAL:
        return
    _Line.written = -float("inf") if left == 0 else now
    done = rows - left
    text = f"fixedopt: {done}/{rows} rows stopped ({100 * done / rows:.0f}%), step {int(step)}"
    print("\r" + text, end="\n" if left == 0 else "", flush=True)


def _tqdm() -> Any:
    """The tqdm class used for bars (``tqdm.auto``: a widget in a notebook); tqdm is
    optional and untyped, hence ``Any``."""
    return importlib.import_module("tqdm.auto").tqdm


class _Bars:
    """The one bar of the solve in progress, between its first and last report."""

    bar: Any = None  # a tqdm bar


def report_bar(
    step: SupportsInt, running: SupportsInt, total: SupportsInt, worst: SupportsFloat
) -> None:
    """Advance a tqdm bar of rows stopped, with the worst projected gradient as postfix.

    A report that does not continue the open bar (another batch size, or fewer rows
    stopped than it shows: a new solve after one that was interrupted) opens a new
    bar. The report with no row running completes and closes the bar.
    """
    steps, left, rows, largest = int(step), int(running), int(total), float(worst)
    done = rows - left
    bar = _Bars.bar
    if bar is None or bar.total != rows or done < bar.n:
        if bar is not None:
            bar.close()
        bar = _Bars.bar = _tqdm()(total=rows, desc="fixedopt", unit="row")
    if left > 0:
        bar.set_postfix_str(f"step {steps}, max |projected grad| {largest:.2e}")
    bar.update(done - bar.n)
    if left == 0:
        bar.close()
        _Bars.bar = None


def progress_option(progress: bool | int | str | None) -> Progress | None:
    """The :class:`Progress` of the ``progress`` argument of ``minimize``/``least_squares``.

    ``False``/``None``: off. ``True``: a tqdm bar where tqdm is installed, else one
    line rewritten in place at most every 0.5 s (checked every 10 steps); an int
    ``k >= 1``: a line of text every ``k`` steps (a log). ``"bar"``: a tqdm bar
    updated every 10 steps (needs tqdm installed).

    Example:
      >>> progress_option(5).every
      5
      >>> progress_option("bar").report.__name__
      'report_bar'
      >>> progress_option(False) is None
      True
    """
    if progress is None or isinstance(progress, (bool, np.bool_)):
        if not progress:
            return None
        try:
            _tqdm()
        except ImportError:
            return Progress(DEFAULT_EVERY, report_line)
        return Progress(DEFAULT_EVERY, report_bar)
    if isinstance(progress, str) and progress == "bar":
        try:
            _tqdm()
        except ImportError as error:
            raise ValueError(
                '`progress="bar"` needs tqdm: install it (pip install tqdm, or '
                f'"fixedopt[progress]") or use progress=True for text ({error})'
            ) from None
        return Progress(DEFAULT_EVERY, report_bar)
    every = integer("progress", progress, minimum=1, expected='a bool, an int >= 1 or "bar"')
    return Progress(every, report_text)
