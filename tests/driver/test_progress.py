"""The tqdm progress bar of a batched solve (``progress="bar"``), under ``jit`` too."""

import io
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tqdm.std

import fixedopt
from fixedopt._driver import progress as _progress
from tests.helpers import quadratic

GTOL = 1e-6
# The absolute gradient test alone, and L-BFGS with backtracking searches: the rows take
# enough steps for the bar to show intermediate counts (the default's Hager-Zhang
# searches solve these n = 6 quadratics within the bar's first 10 steps), and every
# running row's gradient is above GTOL.
TOLERANCE = {"abs_gtol": GTOL, "gtol": 0.0, "ftol": 0.0, "xtol": 0.0}
SLOW_ROWS = {**TOLERANCE, "solver": fixedopt.LBFGS(linesearch="backtracking")}


def residuals(x, curvature, center):
    return jnp.concatenate([jnp.sqrt(curvature) * (x - center), jnp.diff(x) ** 2])


def batch(size, n=6, seed=0):
    rng = np.random.default_rng(seed)
    args = (jnp.asarray(rng.uniform(1, 1e3, (size, n))), jnp.asarray(rng.normal(size=(size, n))))
    return jnp.zeros((size, n)), jnp.asarray(rng.random((size, n)) < 0.3), args


@pytest.fixture
def bars(monkeypatch):
    """Every bar the solves open: real tqdm bars writing to a StringIO, with each
    update's count and postfix recorded."""
    opened = []

    class Recorded(tqdm.std.tqdm):
        def __init__(self, *args, **kwargs):
            self.counts, self.postfixes, self.text = [], [], io.StringIO()
            super().__init__(*args, file=self.text, mininterval=0, **kwargs)
            opened.append(self)

        def update(self, n=1):
            super().update(n)
            self.counts.append(self.n)
            self.postfixes.append(self.postfix)

    monkeypatch.setattr(_progress, "_tqdm", lambda: Recorded)
    monkeypatch.setattr(_progress._Bars, "bar", None)
    return opened


def check_bar(bar, size, solution):
    """One complete bar: it ends at ``size`` rows, closed, after counts that never
    decrease, and each postfix's worst gradient is a running row's (above ``gtol``)."""
    assert bar.total == size and bar.counts[-1] == size and bar.disable  # closed
    assert np.all(np.diff(bar.counts) >= 0) and bar.counts[0] < size
    worst = [float(postfix.rsplit(" ", 1)[1]) for postfix in bar.postfixes[:-1]]
    assert worst and min(worst) > GTOL
    steps = [int(postfix.split(",")[0].removeprefix("step ")) for postfix in bar.postfixes[:-1]]
    # The step shown is the loop's trip: through lanes, at most every row's steps
    # one after the other (plus the trip that starts each refill's rows).
    assert steps == sorted(steps) and max(steps) <= int(np.sum(solution.steps)) + size
    assert f"{size}/{size}" in bar.text.getvalue()


def test_bar_counts_every_row_of_a_jitted_solve(bars):
    size = 40
    x0, fixed, args = batch(size)

    @jax.jit
    def solve(x0, fixed, args):
        return fixedopt.minimize(
            quadratic, x0, fixed, args=args, batched=True, **SLOW_ROWS, progress="bar"
        )

    first = jax.block_until_ready(solve(x0, fixed, args))
    second = jax.block_until_ready(solve(x0, ~fixed, args))  # same program, new mask
    jax.effects_barrier()
    assert solve._cache_size() == 1
    assert len(bars) == 2, "one bar per solve"
    for bar, solution in zip(bars, (first, second)):
        assert bool(jnp.all(solution.converged))
        check_bar(bar, size, solution)


def test_bar_of_least_squares(bars):
    size = 24
    x0, fixed, args = batch(size, seed=1)
    solution = fixedopt.least_squares(
        residuals, x0, fixed, args=args, batched=True, **TOLERANCE, progress="bar"
    )
    jax.block_until_ready(solution)
    jax.effects_barrier()
    assert len(bars) == 1
    check_bar(bars[0], size, solution)


def jaxpr_text(progress) -> str:
    x0, fixed, args = batch(8)
    solve = lambda x0: (
        fixedopt.minimize(quadratic, x0, fixed, args=args, batched=True, progress=progress).x
    )
    return str(jax.make_jaxpr(solve)(x0))


def test_no_callback_when_progress_is_off():
    assert "callback" not in jaxpr_text(False)
    assert "callback" in jaxpr_text("bar")


def test_bar_without_tqdm_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # import tqdm.auto fails
    x0, fixed, args = batch(8)
    with pytest.raises(ValueError, match=r'`progress="bar"` needs tqdm: install it'):
        fixedopt.minimize(quadratic, x0, fixed, args=args, batched=True, progress="bar")


def test_bad_progress_names_the_argument():
    x0, fixed, args = batch(8)
    with pytest.raises(ValueError, match=r'`progress` must be a bool, an int >= 1 or "bar", got'):
        fixedopt.minimize(quadratic, x0, fixed, args=args, batched=True, progress="bars")


@pytest.mark.parametrize("lanes", [3, 64], ids=["refilled", "whole_batch"])
def test_one_bar_over_the_batch_through_lanes(bars, lanes):
    """One bar over the whole batch, however the lanes refill."""
    x0, fixed, args = batch(64, seed=2)
    solution = fixedopt.minimize(
        quadratic, x0, fixed, args=args, batched=True, **SLOW_ROWS, progress="bar", lanes=lanes
    )
    jax.block_until_ready(solution)
    jax.effects_barrier()
    assert [bar.total for bar in bars] == [64]
    for bar in bars:
        check_bar(bar, bar.total, solution)
