"""``benchmarks.first_call``: its ``spectra_slow`` case has what it exists for (a slow row
whose block forms a tail, at the quick and the full batch alike) and its table splits
the first call per program and thread."""

import jax
import numpy as np

import fixedopt
from benchmarks import first_call, first_call_cases
from fixedopt._driver import batching


def test_the_slow_spectra_case_has_a_tail_at_any_batch(monkeypatch):
    """The degenerate spectrum is the same at every B, so the quick run (B = 200) and
    the full one (2000) meet the same tail; 20 rows here (a block of the same program)."""
    tails = []
    put_rows = batching._put_rows
    monkeypatch.setattr(batching, "_put_rows", lambda *a: tails.append(a[2]) or put_rows(*a))
    p0, fixed, y = first_call_cases.spectra_data(20, slow=True)
    x, bounds = first_call_cases.X_SPECTRA, first_call_cases.SPECTRA_BOUNDS
    model = first_call_cases.spectrum
    fit = fixedopt.curve_fit(model, x, y, p0, bounds=bounds, fixed=fixed, batched=True, result=True)
    steps = np.asarray(fit[2].solution.steps)
    assert steps[-1] > 3 * steps[:-1].max(), steps
    assert tails and all(list(rows) == [19] for rows in tails), tails
    clean = first_call_cases.spectra_data(20)
    np.testing.assert_array_equal(clean[2][:-1], y[:-1])  # only the last spectrum differs


def test_the_table_lists_the_first_calls_programs_by_thread():
    found = []
    with first_call.per_program() as programs:
        jax.jit(lambda v: v * 2.0)(np.ones(3))  # a new function: traced and compiled here
        found.append(dict(programs))
    ((name, thread), entry), *_ = found[0].items()
    assert (name, thread) == ("<lambda>", "caller") and entry["count"] == 1
    assert entry["trace"] > 0 and entry["lower"] > 0 and entry["compile"] > 0
    solve = {"program": "_solve", "thread": "ahead", "count": 1, "trace": 0.5, "lower": 0.25,
             "compile": 1.5}  # fmt: skip
    small = {"program": "<lambda>", "thread": "caller", "count": 3, "trace": 0.01,
             "lower": 0.01, "compile": 0.01}  # fmt: skip
    record = {"case": "spectra_slow", "runs": [{"new_model_s": 1.0, "programs": [small, solve]}]}
    assert first_call.program_rows(record) == [
        "| spectra_slow | _solve | ahead | 1 | 0.50 / 0.25 / 1.50 |",
        "| spectra_slow | 1 others | | 3 | 0.01 / 0.01 / 0.01 |",
    ]
    cached = {"program": "tail", "thread": "caller", "count": 1, "trace": 0.0, "lower": 0.02,
              "compile": 0.3}  # fmt: skip
    record["runs"][0] |= {"new_process_s": 0.5, "again_programs": [cached]}
    assert first_call.program_rows(record, "new_process") == [
        "| spectra_slow | tail | caller | 1 | 0.00 / 0.02 / 0.30 |"
    ]
