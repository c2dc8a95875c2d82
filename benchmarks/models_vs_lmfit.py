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

Equality is measured on those fits: both sides at their defaults (lmfit's ``leastsq``
with MINPACK's forward-difference Jacobian and ``ftol = xtol = 1.5e-8``), and both given
the exact Jacobian (JAX's, passed to lmfit as ``Dfun``) and tolerances of 1e-15. Why
lmfit's defaults differ (a referee, lmfit half-way between): the study
``studies/2026-12-05-lmfit_equality/``.

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
    return lambda: model.fit(data, params, x=x, **options)


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


def lmfit_loop(truth, data, known, tied, count, exact=False):
    """lmfit's fits of the first ``count`` spectra: at its defaults, or (``exact``) with
    the exact Jacobian as ``Dfun`` and tolerances of 1e-15."""
    model = lmfit.models.PseudoVoigtModel(prefix="p1_")
    model = model + lmfit.models.PseudoVoigtModel(prefix="p2_") + lmfit.models.LinearModel()
    fit_kws = {"Dfun": lmfit_jacobian, **TIGHT} if exact else {}
    return [model.fit(data[row], lmfit_params(model, truth, known, tied, row), x=X,
                      fit_kws=fit_kws) for row in range(count)]  # fmt: skip


_JACOBIAN = jax.jit(jax.jacfwd(lambda p: plain(jnp.asarray(X), *p, 0.0)))  # no tie flag


def lmfit_jacobian(params, *args, **kwargs):
    """lmfit's ``Dfun``: the exact Jacobian of its residual ``data - model`` in its varied
    parameters, in its order; with the tie, ``p1_sigma``'s column carries ``p2_sigma``'s."""
    full = np.asarray(_JACOBIAN(jnp.asarray([params[name].value for name in NAMES], float)))
    columns = dict(zip(NAMES, full.T))
    if params["p2_sigma"].expr:
        columns["p1_sigma"] = columns["p1_sigma"] + columns["p2_sigma"]
    return -np.column_stack([columns[n] for n, p in params.items() if p.vary and not p.expr])


def numbers(fits) -> list[dict]:
    """``{name: (value, stderr)}`` per fit, from lmfit's results (a list) or fixedopt's."""
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


def measure(spectra_count: int, lmfit_fits: int, rounds: int) -> dict:
    inputs = spectra(spectra_count)
    calls = {"models": models_call(*inputs), "curve_fit": curve_fit_call(*inputs)}
    outputs = {}
    firsts = {name: first_call(lambda call=call, name=name: outputs.__setitem__(name, call()))
              for name, call in calls.items()}  # fmt: skip
    times, _ = interleaved(calls, rounds)
    with warnings.catch_warnings():  # MINPACK at tolerances of 1e-15: "too small" (ier 6-8)
        warnings.simplefilter("ignore", RuntimeWarning)
        fits = {"fixedopt default": outputs["models"],
                "fixedopt tight": models_call(*inputs, **TIGHT)(),
                "lmfit exact, tight": lmfit_loop(*inputs, lmfit_fits, exact=True)}  # fmt: skip
    start = time.perf_counter()
    fits["lmfit default"] = lmfit_loop(*inputs, lmfit_fits)
    lmfit_per_fit = (time.perf_counter() - start) / lmfit_fits
    return {
        "spectra": spectra_count, "lmfit_fits": lmfit_fits, "rounds": rounds,
        **{f"{name}_{key}": info[key] for name, info in firsts.items()
           for key in ("first_call_s", "compile_s")},
        **{f"{name}_warm_s": statistics.median(samples) for name, samples in times.items()},
        "lmfit_per_fit_s": lmfit_per_fit, "lmfit_batch_s": lmfit_per_fit * spectra_count,
        "converged": int(outputs["models"].success.sum()),
        "agreement": {f"{a} vs {b}": agreement(fits[a], fits[b], inputs[3]) for a, b in PAIRS},
    }  # fmt: skip


PAIRS = (("fixedopt default", "lmfit default"), ("fixedopt tight", "lmfit exact, tight"),
         ("fixedopt default", "lmfit exact, tight"))  # fmt: skip
COMPARED = {  # the rows of the equality table
    "fixedopt default": "fixedopt's defaults (exact Jacobian; gtol = xtol = sqrt(eps), ftol = eps)",
    "fixedopt tight": "fixedopt, tolerances 1e-15",
    "lmfit default": "lmfit's default (leastsq: forward differences, ftol = xtol = 1.5e-8)",
    "lmfit exact, tight": "lmfit leastsq, exact Jacobian (`Dfun`), tolerances 1e-15",
}


def equality_table(record: dict) -> list[str]:
    lines = [
        "| compared | fits | values: max (median) distance, in the reference's standard "
        "errors | values: max relative | errors: max relative | tied `p2_sigma`: values "
        "(in its errors) / errors, max relative |", "|---|---|---|---|---|---|",
    ]  # fmt: skip
    for label, numbers in record["agreement"].items():
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
    lmfit_s = r["lmfit_batch_s"]
    rows = [(f"fixedopt.models, first call (compile {r['models_compile_s']:.2f} s)",
             r["models_first_call_s"], ".2f", ".1f"),
            (f"fixedopt.models, warm (median of {r['rounds']})", r["models_warm_s"], ".3f", ".0f"),
            (f"curve_fit plain function, first call (compile {r['curve_fit_compile_s']:.2f} s)",
             r["curve_fit_first_call_s"], ".2f", ".1f"),
            ("curve_fit plain function, warm", r["curve_fit_warm_s"], ".3f", ".0f")]  # fmt: skip
    return [
        f"# fixedopt.models vs lmfit and vs curve_fit ({env['backend']}, {env['date']})", "",
        f"{r['spectra']} spectra, 2 pseudo-Voigts + a line (10 parameters, 301 points), "
        "per-spectrum known parameters, bounds, `p2_sigma = p1_sigma` in half. "
        f"lmfit's loop timed on {r['lmfit_fits']} fits and scaled. Device "
        f"{env['device']}, {env['host_cpus']} CPUs (shared with other jobs: ratios are noisy).",
        "", "| | seconds | vs lmfit's loop |", "|---|---|---|",
        f"| lmfit loop (leastsq), scaled to the batch | {lmfit_s:.2f} | 1 |",
        *(f"| {label} | {s:{digits}} | {lmfit_s / s:{ratio}}x |"
          for label, s, digits, ratio in rows),
        "",
        f"models / plain function: warm {r['models_warm_s'] / r['curve_fit_warm_s']:.3f}, "
        f"first call {r['models_first_call_s'] / r['curve_fit_first_call_s']:.3f}. "
        f"Converged: {r['converged']} of {r['spectra']}.", "",
        f"## Equality (lmfit: the first {r['lmfit_fits']} spectra)", "", *equality_table(r), "",
        "Parameters are counted where the reference reports an error (fixed ones are left "
        "out). A value near 0 (the slope) has a large relative difference for any method; "
        "the distance in standard errors is the measure. The gap at lmfit's defaults is "
        "lmfit's: its forward-difference Jacobian, and MINPACK's stop at ftol = xtol = 1.5e-8 "
        "with the covariance of the last Jacobian it evaluated (the study "
        "`studies/2026-12-05-lmfit_equality/` in the repository).", "",
        "Reproduce: `python -m benchmarks.models_vs_lmfit "
        f"--spectra {r['spectra']} --lmfit-fits {r['lmfit_fits']} --rounds {r['rounds']}`",
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spectra", type=int, default=2000)
    parser.add_argument("--lmfit-fits", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("benchmarks/results"))
    args = parser.parse_args()
    env = environment()
    record = measure(args.spectra, args.lmfit_fits, args.rounds)
    print(record)
    write_markdown(
        args.out / f"{env['backend']}-models_vs_lmfit-{env['date']}", markdown(record, env)
    )


if __name__ == "__main__":
    main()
