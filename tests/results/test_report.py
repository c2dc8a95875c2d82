"""``fixedopt.report``, ``to_records`` and ``to_dataframe`` against the solution's
own arrays (counted and formatted independently with NumPy)."""

import sys

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import fixedopt

# Reports of a solution against its own arrays, counted and formatted here: nothing
# XLA's backend optimizations change (conftest.py).
pytestmark = pytest.mark.fewer_optimizations

T = jnp.linspace(0.0, 1.0, 8)


def line(p, y):
    return p[0] * T + p[1] - y


def batch():
    """Six line fits: rows 0-1 start at their exact solution (0 steps), the rest
    cannot converge in one step; row 5 has its slope fixed, rows 3-4 hit a bound."""
    slopes = np.array([1.0, 2.0, 0.5, 3.0, 3.5, 1.5])
    y = slopes[:, None] * np.asarray(T) + 0.2
    y[2:] += 0.01 * np.random.default_rng(0).normal(size=(4, T.size))
    x0 = np.where(np.arange(6)[:, None] < 2, np.stack([slopes, np.full(6, 0.2)], 1), 0.0)
    fixed = np.zeros((6, 2), bool)
    fixed[5, 0] = True
    x0[5, 0] = 1.5
    bounds = (np.array([-5.0, -5.0]), np.array([2.5, 5.0]))
    sol = fixedopt.least_squares(
        line, jnp.asarray(x0), jnp.asarray(fixed), args=(jnp.asarray(y),), batched=True,
        bounds=bounds, max_steps=1,
    )  # fmt: skip
    return sol, y, fixed, bounds


def test_batch_report_counts_and_summaries():
    sol, *_ = batch()
    report = fixedopt.report(sol)
    text, facts = str(report), dict(report.facts)
    status = np.asarray(sol.status)
    for code in np.unique(status):
        assert facts[fixedopt.Status(int(code)).name] == f"{np.sum(status == code)} rows"
    assert np.sum(status == fixedopt.Status.MAX_STEPS) >= 1
    steps, grad_norm, value = (np.asarray(a) for a in (sol.steps, sol.grad_norm, sol.value))
    assert f"median {np.median(steps):.3g}, max {steps.max()}" in text
    worst = int(np.argmax(grad_norm))
    assert f"largest {grad_norm[worst]:.3g} (row {worst})" in text
    low, mid, high = np.percentile(value, [0, 50, 100])
    assert f"min {low:.3g}, median {mid:.3g}, max {high:.3g}" in text


def test_row_report_marks_fixed_at_bound_and_standard_errors():
    sol, y, fixed, bounds = batch()
    for row in (3, 4):
        assert float(sol.x[row, 0]) == 2.5  # the slope's upper bound
    plain = fixedopt.report(sol, 3, names=["slope", "offset"])  # the solve's own flags
    table = {cells[0]: cells for cells in plain.table}
    assert table["slope"][3] == "at bound" and table["offset"][3] == ""
    assert table["slope"][2] == ""  # no covariance: no standard errors
    assert [cells[3] for cells in fixedopt.report(sol, 5).table] == ["fixed", ""]
    restated = fixedopt.report(sol, 3, fixed=fixed, bounds=bounds, names=["slope", "offset"])
    assert restated == plain  # the solve's own mask and bounds, restated: accepted
    cov = fixedopt.covariance(sol, line, args=(jnp.asarray(y),))
    for row in (2, 5):
        rows = fixedopt.report(sol, row, covariance=cov).table
        for k, cells in enumerate(rows):
            assert cells[0] == f"x[{k}]"
            assert cells[1] == f"{float(sol.x[row, k]):.5g}"
            assert cells[2] == f"{float(cov.stderr[row, k]):.3g}"
            assert cells[3] == ("fixed" if fixed[row, k] else "")
    text = str(fixedopt.report(sol, 5, covariance=cov))
    assert "row 5" in text and "fixed" in text and fixedopt.Status(int(sol.status[5])).name in text


def test_a_mask_or_bounds_other_than_the_solves_are_refused():
    """A report describes its solve: flags from another mask or other bounds would
    misdescribe it."""
    sol, _, fixed, _ = batch()
    other = fixed.copy()
    other[3, 1] = True
    with pytest.raises(ValueError, match="`fixed` differs from the solve's mask"):
        fixedopt.report(sol, 3, fixed=other)
    assert fixedopt.report(sol, 2, fixed=other).table  # row 2's mask is the solve's
    with pytest.raises(ValueError, match="`bounds` differ from the solve's"):
        fixedopt.report(sol, 3, bounds=(-5.0, 2.0))


def test_html_has_the_same_cells_escaped():
    sol, _, fixed, _ = batch()
    report = fixedopt.report(sol, 5, fixed=fixed, names=["<slope>", "offset"])
    page = report._repr_html_()
    assert "&lt;slope&gt;" in page and "<slope>" not in page
    assert page.count("<tr>") == len(report.facts) + len(report.table) + 1
    for cells in report.table:
        assert all(f"<td>{cell}</td>" in page for cell in cells if "<" not in cell)


def test_batch_report_counts_the_reasons_of_each_status():
    sol = batch()[0]
    facts = fixedopt.report(sol).facts
    status, reason = np.asarray(sol.status), np.asarray(sol.reason)
    labels = [label for label, _ in facts]
    for code in np.unique(status):
        start = labels.index(fixedopt.Status(int(code)).name)
        for why in np.unique(reason[status == code]):
            count = np.sum((status == code) & (reason == why))
            assert (f"  {fixedopt.Reason(int(why)).name}", f"{count} rows") in facts[start:]


def test_records_are_optimize_results():
    sol, *_ = batch()
    records = fixedopt.to_records(sol)
    assert len(records) == 6
    for row, record in enumerate(records):
        result = scipy.optimize.OptimizeResult(record)
        np.testing.assert_array_equal(result.x, np.asarray(sol.x[row]))
        assert result.fun == float(sol.value[row]) and result.nit == int(sol.steps[row])
        assert result.success == bool(sol.converged[row]) and result.status == int(sol.status[row])
        assert result.message == fixedopt.Status(result.status).name
    tree = fixedopt.minimize(lambda p: jnp.sum((p["a"] - 1.0) ** 2) + p["b"] ** 2,
                             {"a": jnp.zeros(2), "b": jnp.asarray(1.0)}, False)  # fmt: skip
    (one,) = fixedopt.to_records(tree)
    assert set(one["x"]) == {"a", "b"} and one["x"]["a"].shape == (2,)


def test_dataframe_columns_or_a_named_import_error(monkeypatch):
    sol, *_ = batch()
    try:
        import pandas  # noqa: F401  (optional: the frame is checked where installed)
    except ImportError:
        pass
    else:
        frame = fixedopt.to_dataframe(sol, names=["slope", "offset"])
        np.testing.assert_array_equal(frame["slope"], np.asarray(sol.x[:, 0]))
        np.testing.assert_array_equal(frame["nit"], np.asarray(sol.steps))
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if pandas were not installed
    with pytest.raises(ImportError, match="pip install pandas"):
        fixedopt.to_dataframe(sol)


def test_bad_row_and_names_are_named():
    sol = batch()[0]
    with pytest.raises(ValueError, match="`row` must be an int"):
        fixedopt.report(sol, 6)
    with pytest.raises(ValueError, match="`names` must name each of the 2"):
        fixedopt.report(sol, 0, names=["a"])


def test_dict_parameter_names_read_as_written():
    """``A1``, ``peak.width[1]``, ``layers[0]``: not ``['A1']`` (jax's keystr)."""
    x0 = {"A1": jnp.zeros(()), "peak": {"width": jnp.ones(2)}, "layers": [jnp.zeros(())]}
    sol = fixedopt.minimize(lambda p: (p["A1"] - 1.0) ** 2 + jnp.sum(p["peak"]["width"] ** 2)
                            + p["layers"][0] ** 2, x0, False)  # fmt: skip
    names = [row[0] for row in fixedopt.report(sol).table]
    assert names == ["A1", "layers[0]", "peak.width[0]", "peak.width[1]"]


def test_names_from_the_written_tree_keep_its_key_order():
    """JAX sorts dict keys (``sol.x`` has lost the order); the ``x0`` as written has it."""
    x0 = {"offset": jnp.zeros(()), "A1": jnp.zeros(2)}
    sol = fixedopt.minimize(lambda p: jnp.sum((p["A1"] - 1.0) ** 2) + p["offset"] ** 2, x0, False)
    assert [row[0] for row in fixedopt.report(sol).table] == ["A1[0]", "A1[1]", "offset"]
    table = fixedopt.report(sol, names=x0).table
    assert [row[0] for row in table] == ["offset", "A1[0]", "A1[1]"]
    assert table[1][1] == "1"  # A1[0]'s own value, not offset's
    with pytest.raises(ValueError, match="structure and shapes"):
        fixedopt.report(sol, names={"offset": jnp.zeros(3), "A1": jnp.zeros(2)})


def _with_bad_rows(bad):
    """A batch of 5 rows (``fun`` of row b is NaN where ``bad[b]``): their statuses are
    NONFINITE, the other rows converge with different gradients."""
    target = jnp.arange(5.0)[:, None] * jnp.ones((5, 2))

    def fun(x, target, bad):
        return jnp.sum((x - target) ** 2) + jnp.where(bad, jnp.nan, 0.0)

    args = (target, jnp.asarray(bad))
    return fixedopt.minimize(fun, jnp.zeros((5, 2)), False, args=args, batched=True, max_steps=1)


@pytest.mark.parametrize(
    "bad", [[False] * 5, [False, False, False, True, False], [True, False, True, False, False],
            [True] * 5],
)  # fmt: skip
def test_batch_report_keeps_the_worst_finite_gradient_apart_from_nonfinite_rows(bad):
    """The worst gradient and the values are those of the finite rows (computed here
    with numpy from the solution); the NaN rows are counted apart, by row."""
    sol = _with_bad_rows(bad)
    facts = dict(fixedopt.report(sol).facts)
    assert str(sol.summary()) == str(fixedopt.report(sol))  # the same facts either way
    bad = np.array(bad)
    assert np.all(np.asarray(sol.status)[bad] == fixedopt.Status.NONFINITE)
    grad_norm, value = np.asarray(sol.grad_norm), np.asarray(sol.value)
    if bad.all():
        assert facts["grad_norm"] == "no finite row"
    else:
        worst = int(np.flatnonzero(~bad)[np.argmax(grad_norm[~bad])])
        assert facts["grad_norm"] == f"largest {grad_norm[worst]:.3g} (row {worst})"
        low, mid, high = np.percentile(value[~bad], [0, 50, 100])
        assert facts["value"] == f"min {low:.3g}, median {mid:.3g}, max {high:.3g}"
    if bad.any():
        rows = ", ".join(map(str, np.flatnonzero(bad)))
        assert facts["non-finite"] == f"{bad.sum()} rows (value or grad_norm NaN/Inf: {rows})"
    else:
        assert "non-finite" not in facts
