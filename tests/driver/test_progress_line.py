"""``progress=True`` without tqdm: one line rewritten in place, throttled, ended when
every row has stopped (issue 63: 162,000 rows printed 115 lines)."""

import sys

import jax.numpy as jnp

import fixedopt
from fixedopt._driver import progress as _progress


def test_the_line_is_rewritten_at_most_every_interval_and_ended(capsys, monkeypatch):
    clock = iter([0.0, 0.1, 0.2, 0.7, 0.8, 0.9])
    monkeypatch.setattr(_progress.time, "monotonic", lambda: next(clock))
    for step, left in ((10, 90), (20, 80), (30, 70), (40, 50), (50, 40), (60, 0)):
        _progress.report_line(step, left, 100, 1.0)
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.endswith("\n")
    shown = out.split("\r")[1:]
    assert shown == [
        "fixedopt: 10/100 rows stopped (10%), step 10",
        "fixedopt: 50/100 rows stopped (50%), step 40",
        "fixedopt: 100/100 rows stopped (100%), step 60\n",
    ]


def test_progress_true_without_tqdm_writes_one_line(capfd, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # as if tqdm were not installed
    assert fixedopt._driver.progress.progress_option(True).report is _progress.report_line
    x0 = jnp.zeros((64, 3))
    target = jnp.linspace(1.0, 2.0, 64 * 3).reshape(64, 3)
    fun = lambda x, t: jnp.sum((x - t) ** 4)
    fixedopt.minimize(fun, x0, False, args=(target,), batched=True, progress=True, lanes=8)
    out = capfd.readouterr().out
    assert out.count("\n") == 1 and out.rstrip("\n").rsplit("\r", 1)[1].startswith(
        "fixedopt: 64/64 rows stopped (100%)"
    )
