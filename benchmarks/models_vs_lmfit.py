"""fixedopt.models against lmfit's loop and against the same model as a plain function
through fixedopt.curve_fit: spectra of two pseudo-Voigt peaks on a linear baseline.

Each spectrum (301 points) has its own known parameters (fixed at the truth: each of
p1_fraction, p2_fraction, p2_center and slope known in about a third of the spectra),
bounds (amplitudes and widths >= 0, fractions in [0, 1]) and, in half of them, the tie
``p2_sigma = p1_sigma``. fixedopt fits every spectrum in one call (its first call, the
compile included, and warm calls); lmfit fits ``--lmfit-fits`` of them in its loop, one
at a time (its default, ``leastsq``), and its time per fit is scaled to the batch. The
plain function takes the tie as lmfit users fake it: an 11th parameter, a per-spectrum
flag that is always fixed (``p2_sigma`` is fixed where the flag is set).

Equality is measured twice on those fits: both sides at their defaults (lmfit's
``leastsq`` with MINPACK's forward-difference Jacobian and ``ftol = xtol = 1.5e-8``), and
both given the exact Jacobian (JAX's, passed to lmfit as ``Dfun``) and tolerances of
1e-15; a referee, scipy's ``least_squares`` (``trf``, the exact Jacobian, tolerances
1e-15, errors ``inv(J^T J) s^2`` at its solution), fits the first ``--referee-fits``.

    python -m benchmarks.models_vs_lmfit --spectra 2000 --lmfit-fits 200

Writes ``benchmarks/results/<backend>-models_vs_lmfit-<date>.md``. The persistent compilation
cache is off for this program (``FIXEDOPT_CACHE=off``), so the first call compiles.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import time
import warnings

os.environ["FIXEDOPT_CACHE"] = "off"  # a first call that compiles

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import lmfit  # noqa: E402
import numpy as np  # noqa: E402
import scipy.optimize  # noqa: E402

import fixedopt  # noqa: E402
from benchmarks.timing import environment, first_call, interleaved, write_markdown  # noqa: E402
from fixedopt.models import LinearModel, PseudoVoigtModel, lineshapes  # noqa: E402

X = np.linspace(0.0, 30.0, 301)
NAMES = ("p1_amplitude", "p1_center", "p1_sigma", "p1_fraction", "p2_amplitude",
         "p2_center", "p2_sigma", "p2_fraction", "slope", "intercept")  # fmt: skip
START = (8.0, 9.5, 1.2, 0.5, 5.0, 18.5, 1.2, 0.5, 0.0, 0.3)
KNOWN = ("p1_fraction", "p2_fraction", "p2_center", "slope")
BOUNDED = {"p1_amplitude": (0, np.inf), "p2_amplitude": (0, np.inf), "p1_sigma": (0, np.inf),
           "p2_sigma": (0, np.inf), "p1_fraction": (0, 1), "p2_fraction": (0, 1)}  # fmt: skip
TIGHT = {"ftol": 1e-15, "xtol": 1e-15, "gtol": 1e-15}


def spectra(count: int, seed: int = 0):
    """Truth ``(count, 10)``, data, the known mask ``(count, 10)`` and the tie flags."""
    rng = np.random.default_rng(seed)
    truth = np.column_stack([
        rng.uniform(8, 12, count), rng.uniform(9, 11, count), rng.uniform(0.8, 1.2, count),
        rng.uniform(0.2, 0.8, count), rng.uniform(4, 8, count), rng.uniform(17.5, 18.5, count),
        rng.uniform(1.2, 1.8, count), rng.uniform(0.2, 0.8, count),
        rng.uniform(-0.02, 0.04, count), rng.uniform(0.3, 0.7, count),
    ])  # fmt: skip
    tied = rng.random(count) < 0.5
    truth[tied, 6] = truth[tied, 2]
    known = np.zeros((count, len(NAMES)), bool)
    for name in KNOWN:
        known[:, NAMES.index(name)] = rng.random(count) < 1 / 3
    data = np.array([plain(X, *row, 0.0) for row in truth]) + rng.normal(0, 0.05, (count, X.size))
    return truth, data, known, tied


def plain(x, a1, c1, s1, f1, a2, c2, s2, f2, slope, intercept, tie):
    """The model as a plain function, the tie faked by a fixed flag ``tie``."""
    s2 = jnp.where(tie > 0.5, s1, s2)
    return (lineshapes.pvoigt(x, a1, c1, s1, f1) + lineshapes.pvoigt(x, a2, c2, s2, f2)
            + slope * x + intercept)  # fmt: skip


def models_call(truth, data, known, tied, **options):
    model = PseudoVoigtModel(prefix="p1_") + PseudoVoigtModel(prefix="p2_") + LinearModel()
    params = model.make_params(**dict(zip(NAMES, START)))
    for i, name in enumerate(NAMES):
        params[name].set(value=np.where(known[:, i], truth[:, i], START[i]), vary=~known[:, i])
        if name in BOUNDED:
            params[name].set(min=BOUNDED[name][0], max=BOUNDED[name][1])
    params["p2_sigma"].set(expr=["p1_sigma" if t else None for t in tied])
    x = jnp.asarray(X)

    def call():
        return model.fit(data, params, x=x, **options)

    return call


def curve_fit_call(truth, data, known, tied):
    start = np.tile((*START, 0.0), (len(data), 1))
    start[:, :-1] = np.where(known, truth, start[:, :-1])
    start[:, -1] = tied
    fixed = np.column_stack([known, np.ones(len(data), bool)])
    fixed[:, NAMES.index("p2_sigma")] |= tied
    lower = [BOUNDED.get(n, (-np.inf, np.inf))[0] for n in NAMES] + [-np.inf]
    upper = [BOUNDED.get(n, (-np.inf, np.inf))[1] for n in NAMES] + [np.inf]
    inputs = jnp.asarray(X), jnp.asarray(data), jnp.asarray(start)

    def call():
        out = fixedopt.curve_fit(plain, *inputs, bounds=(np.array(lower), np.array(upper)),
                                 fixed=fixed, batched=True, result=True)  # fmt: skip
        return jax.block_until_ready(out)

    return call


def lmfit_params(model, truth, known, tied, row):
    params = model.make_params(**dict(zip(NAMES, START)))
    for i, name in enumerate(NAMES):
        if known[row, i]:
            params[name].set(value=truth[row, i], vary=False)
        if name in BOUNDED:
            params[name].set(min=BOUNDED[name][0], max=BOUNDED[name][1])
    if tied[row]:
        params["p2_sigma"].set(expr="p1_sigma")
    return params


def lmfit_loop(truth, data, known, tied, count, exact=False, tight=False):
    """lmfit's fits of the first ``count`` spectra: at its defaults, or with the exact
    Jacobian as ``Dfun`` (``exact``) and tolerances of 1e-15 (``tight``)."""
    model = lmfit.models.PseudoVoigtModel(prefix="p1_")
    model = model + lmfit.models.PseudoVoigtModel(prefix="p2_") + lmfit.models.LinearModel()
    results = []
    for row in range(count):
        params = lmfit_params(model, truth, known, tied, row)
        fit_kws = ({"Dfun": lmfit_jacobian} if exact else {}) | (TIGHT if tight else {})
        results.append(model.fit(data[row], params, x=X, fit_kws=fit_kws))
    return results


_CURVE = jax.jit(lambda p: plain(jnp.asarray(X), *p, 0.0))  # the 10 parameters, no tie flag
_FULL_JACOBIAN = jax.jit(jax.jacfwd(_CURVE))


def free_jacobian(values, free, tie):
    """``(301, len(free))``: the exact Jacobian in the free parameters ``free`` at the
    full vector ``values``; with the tie, ``p1_sigma``'s column carries ``p2_sigma``'s."""
    full = np.asarray(_FULL_JACOBIAN(jnp.asarray(values, float)))
    columns = [full[:, NAMES.index(name)] for name in free]
    if tie and "p1_sigma" in free:
        columns[free.index("p1_sigma")] = columns[free.index("p1_sigma")] + full[:, 6]
    return np.column_stack(columns)


def lmfit_jacobian(params, *args, **kwargs):
    """lmfit's ``Dfun``: the exact Jacobian of its residual ``data - model`` in its varied
    parameters, in its order."""
    free = [name for name, p in params.items() if p.vary and not p.expr]
    tie = bool(params["p2_sigma"].expr)
    return -free_jacobian([params[name].value for name in NAMES], free, tie)


def referee(truth, data, known, tied, count):
    """scipy's ``least_squares`` (trf, exact Jacobian, tolerances 1e-15) on the first
    ``count`` spectra: ``{name: (value, stderr)}`` per fit, errors ``inv(J^T J) s^2``."""
    return [referee_fit(data[row], np.where(known[row], truth[row], START), known[row], tied[row])
            for row in range(count)]  # fmt: skip


def referee_fit(data, start, known, tie):
    """One referee fit from the full vector ``start`` (known entries at their values)."""
    free = [n for i, n in enumerate(NAMES) if not known[i] and not (tie and n == "p2_sigma")]
    index = [NAMES.index(name) for name in free]

    def full(v):
        values = start.copy()
        values[index] = v
        values[6] = values[2] if tie else values[6]
        return values

    lower, upper = np.array([BOUNDED.get(name, (-np.inf, np.inf)) for name in free]).T
    out = scipy.optimize.least_squares(
        lambda v: np.asarray(_CURVE(full(v))) - data, start[index],
        jac=lambda v: free_jacobian(full(v), free, tie), bounds=(lower, upper),
        method="trf", max_nfev=10000, **TIGHT,
    )  # fmt: skip
    jac = free_jacobian(full(out.x), free, tie)
    variance = np.diag(np.linalg.inv(jac.T @ jac)) * np.sum(out.fun**2) / (X.size - len(free))
    stderr = dict(zip(free, np.sqrt(variance)))
    stderr["p2_sigma"] = stderr["p1_sigma"] if tie else stderr.get("p2_sigma", 0.0)
    return {name: (value, stderr.get(name, 0.0)) for name, value in zip(NAMES, full(out.x))}


def numbers(fits):
    """``{name: (value, stderr)}`` per fit, from lmfit's results, fixedopt's or the
    referee's (already in that form)."""
    if isinstance(fits, list) and fits and isinstance(fits[0], dict):
        return fits
    if isinstance(fits, list):
        return [{n: (f.params[n].value, f.params[n].stderr or 0.0) for n in NAMES} for f in fits]
    values, errors = fits.best_values, fits.stderr
    return [{n: (values[n][r], errors[n][r]) for n in NAMES} for r in range(len(fits.values))]


def agreement(ours, theirs, tied) -> dict:
    """Differences to the reference ``theirs`` where it reports an error, for all the
    parameters and for the tied ``p2_sigma`` alone: the values in its standard errors
    (max, median) and relative to the value (max), the errors relative (max)."""
    rows: dict[str, list] = {"all": [], "tied": []}
    pairs = list(zip(numbers(ours), numbers(theirs)))
    for row, (a, b) in enumerate(pairs):
        for name in NAMES:
            (value, error), (reference, reference_error) = a[name], b[name]
            if reference_error:
                distance = abs(value - reference)
                entry = (distance / reference_error, distance / abs(reference),
                         abs(error / reference_error - 1))  # fmt: skip
                rows["all"].append(entry)
                if tied[row] and name == "p2_sigma":
                    rows["tied"].append(entry)
    out: dict = {"fits": len(pairs), "tied_fits": len(rows["tied"])}
    for key, entries in rows.items():
        d = np.array(entries).reshape(-1, 3)
        out[key] = (d[:, 0].max(), np.median(d[:, 0]), d[:, 1].max(), d[:, 2].max())
    return out


def measure(spectra_count: int, lmfit_fits: int, rounds: int, referee_fits: int,
            halfway: bool) -> dict:  # fmt: skip
    inputs = spectra(spectra_count)
    ours, plain_fit = models_call(*inputs), curve_fit_call(*inputs)
    outputs = {}
    firsts = {}
    for name, call in (("models", ours), ("curve_fit", plain_fit)):
        start = time.perf_counter()
        info = first_call(lambda call=call, name=name: outputs.__setitem__(name, call()))
        firsts[name] = info | {"first_call_s": time.perf_counter() - start}
    times, _ = interleaved({"models": ours, "curve_fit": plain_fit}, rounds)
    warm = {name: statistics.median(samples) for name, samples in times.items()}
    start = time.perf_counter()
    reference = lmfit_loop(*inputs, lmfit_fits)
    lmfit_per_fit = (time.perf_counter() - start) / lmfit_fits
    result = outputs["models"]
    return {
        "spectra": spectra_count, "lmfit_fits": lmfit_fits, "rounds": rounds,
        "referee_fits": referee_fits, "halfway": halfway,
        "models_first_s": firsts["models"]["first_call_s"],
        "models_compile_s": firsts["models"]["compile_s"],
        "curve_fit_first_s": firsts["curve_fit"]["first_call_s"],
        "curve_fit_compile_s": firsts["curve_fit"]["compile_s"],
        "models_warm_s": warm["models"], "curve_fit_warm_s": warm["curve_fit"],
        "lmfit_per_fit_s": lmfit_per_fit, "lmfit_batch_s": lmfit_per_fit * spectra_count,
        "converged": int(result.success.sum()),
        "agreement": equality(inputs, result, reference, (lmfit_fits, referee_fits), halfway),
    }  # fmt: skip


def equality(inputs, default, lmfit_default, counts: tuple[int, int], halfway: bool) -> dict:
    """Each comparison of :func:`agreement`, keyed by what is compared with what; with
    ``halfway``, lmfit also with only the exact Jacobian and with only tight tolerances."""
    lmfit_fits, referee_fits = counts
    tight = models_call(*inputs, **TIGHT)()
    variants = {"lmfit exact, tight": (True, True)}
    if halfway:
        variants |= {"lmfit exact, default": (True, False), "lmfit forward, tight": (False, True)}
    fits = {"fixedopt default": default, "fixedopt tight": tight, "lmfit default": lmfit_default}
    with warnings.catch_warnings():  # MINPACK at tolerances of 1e-15: "too small" (ier 6-8)
        warnings.simplefilter("ignore", RuntimeWarning)
        for label, (exact, tolerances) in variants.items():
            fits[label] = lmfit_loop(*inputs, lmfit_fits, exact=exact, tight=tolerances)
    fits["referee"] = referee(*inputs, referee_fits)
    pairs = [("fixedopt default", "lmfit default"), ("fixedopt tight", "lmfit exact, tight"),
             ("fixedopt default", "lmfit exact, tight"), ("fixedopt default", "referee"),
             ("fixedopt tight", "referee"), ("lmfit default", "referee"),
             ("lmfit exact, tight", "referee")]  # fmt: skip
    if halfway:
        for label in ("lmfit exact, default", "lmfit forward, tight"):
            pairs += [("fixedopt default", label), (label, "referee")]
    out = {f"{a} vs {b}": agreement(fits[a], fits[b], inputs[3]) for a, b in pairs}
    if halfway:
        out["own covariance gap"] = own_covariance_gap(fits["lmfit exact, default"], inputs[3])
    return out


def own_covariance_gap(fits, tied) -> float:
    """The largest relative difference between lmfit's errors and ``inv(J^T J) s^2``
    with the exact ``J`` at lmfit's own best values."""
    gap = 0.0
    for row, fit in enumerate(fits):
        values = [fit.params[name].value for name in NAMES]
        jac = free_jacobian(values, fit.var_names, tied[row])
        exact = np.sqrt(np.diag(np.linalg.inv(jac.T @ jac)) * fit.redchi)
        reported = np.array([fit.params[name].stderr for name in fit.var_names])
        gap = max(gap, float(np.max(np.abs(reported / exact - 1))))
    return gap


COMPARED = {  # the rows of the equality table
    "fixedopt default": "fixedopt's defaults (exact Jacobian; gtol = xtol = sqrt(eps), ftol = eps)",
    "fixedopt tight": "fixedopt, tolerances 1e-15",
    "lmfit default": "lmfit's default (leastsq: forward differences, ftol = xtol = 1.5e-8)",
    "lmfit exact, tight": "lmfit leastsq, exact Jacobian (`Dfun`), tolerances 1e-15",
    "lmfit exact, default": "lmfit leastsq, exact Jacobian, default tolerances",
    "lmfit forward, tight": "lmfit leastsq, forward differences, tolerances 1e-15",
    "referee": "scipy least_squares (trf, exact Jacobian, tolerances 1e-15)",
}


def equality_table(record: dict) -> list[str]:
    lines = [
        "| compared | fits | values: max (median) distance, in the reference's standard "
        "errors | values: max relative | errors: max relative | tied `p2_sigma`: values "
        "(in its errors) / errors, max relative |", "|---|---|---|---|---|---|",
    ]  # fmt: skip
    for label, numbers in record["agreement"].items():
        if label == "own covariance gap":
            continue
        ours, theirs = label.split(" vs ")
        (far, median, relative, errors), tied = numbers["all"], numbers["tied"]
        lines.append(
            f"| {COMPARED[ours]} vs {COMPARED[theirs]} | {numbers['fits']} | "
            f"{far:.2g} ({median:.2g}) | {relative:.2g} | {errors:.2g} | "
            f"{tied[0]:.2g} / {tied[3]:.2g} ({numbers['tied_fits']} fits) |"
        )
    return lines


def markdown(record: dict, env: dict) -> list[str]:
    r = record
    speed_first = r["lmfit_batch_s"] / r["models_first_s"]
    speed_warm = r["lmfit_batch_s"] / r["models_warm_s"]
    return [
        f"# fixedopt.models vs lmfit and vs curve_fit ({env['backend']}, {env['date']})", "",
        f"{r['spectra']} spectra, 2 pseudo-Voigts + a line (10 parameters, 301 points), "
        "per-spectrum known parameters, bounds, `p2_sigma = p1_sigma` in half. "
        f"lmfit's loop timed on {r['lmfit_fits']} fits and scaled. Device "
        f"{env['device']}, {env['host_cpus']} CPUs (shared with other jobs: ratios are noisy).",
        "", "| | seconds | vs lmfit's loop |", "|---|---|---|",
        f"| lmfit loop (leastsq), scaled to the batch | {r['lmfit_batch_s']:.2f} | 1 |",
        f"| fixedopt.models, first call (compile {r['models_compile_s']:.2f} s) | "
        f"{r['models_first_s']:.2f} | {speed_first:.1f}x |",
        f"| fixedopt.models, warm (median of {r['rounds']}) | {r['models_warm_s']:.3f} | "
        f"{speed_warm:.0f}x |",
        f"| curve_fit plain function, first call (compile {r['curve_fit_compile_s']:.2f} s) | "
        f"{r['curve_fit_first_s']:.2f} | {r['lmfit_batch_s'] / r['curve_fit_first_s']:.1f}x |",
        f"| curve_fit plain function, warm | {r['curve_fit_warm_s']:.3f} | "
        f"{r['lmfit_batch_s'] / r['curve_fit_warm_s']:.0f}x |",
        "",
        f"models / plain function: warm {r['models_warm_s'] / r['curve_fit_warm_s']:.3f}, "
        f"first call {r['models_first_s'] / r['curve_fit_first_s']:.3f}. "
        f"Converged: {r['converged']} of {r['spectra']}.", "",
        f"## Equality (lmfit: the first {r['lmfit_fits']} spectra; the referee: the first "
        f"{r['referee_fits']})", "",
        *equality_table(r), "", *equality_notes(r), "",
        "Reproduce: `python -m benchmarks.models_vs_lmfit "
        f"--spectra {r['spectra']} --lmfit-fits {r['lmfit_fits']} --rounds {r['rounds']} "
        f"--referee-fits {r['referee_fits']}{' --lmfit-halfway' if r['halfway'] else ''}`",
    ]  # fmt: skip


def equality_notes(record: dict) -> list[str]:
    lines = [
        "Parameters are counted where the reference reports an error (fixed ones are left "
        "out). A value near 0 (the slope) has a large relative difference for any method; "
        "the distance in standard errors is the measure. lmfit's default differs from the "
        "referee as much as from fixedopt: its forward-difference Jacobian moves its steps "
        "and errors, and MINPACK stops at ftol = xtol = 1.5e-8 and returns the covariance of "
        "the last Jacobian it evaluated, at the iterate before its final step (lmfit then "
        "rescales it by its bounds transformation's gradient at the final values).",
    ]
    if "own covariance gap" in record["agreement"]:
        gap = record["agreement"]["own covariance gap"]
        lines += [
            "", f"lmfit with the exact Jacobian at its default tolerances: its errors differ "
            f"by up to {gap:.2g} (relative) from `inv(J^T J) s^2` with the exact `J` at its own "
            "best values.",
        ]  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spectra", type=int, default=2000)
    parser.add_argument("--lmfit-fits", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--referee-fits", type=int, default=20)
    halfway = "also lmfit with only the exact Jacobian and with only tolerances of 1e-15"
    parser.add_argument("--lmfit-halfway", action="store_true", help=halfway)
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("benchmarks/results"))
    args = parser.parse_args()
    env = environment()
    record = measure(args.spectra, args.lmfit_fits, args.rounds, args.referee_fits,
                     args.lmfit_halfway)  # fmt: skip
    print(record)
    write_markdown(
        args.out / f"{env['backend']}-models_vs_lmfit-{env['date']}", markdown(record, env)
    )


if __name__ == "__main__":
    main()
