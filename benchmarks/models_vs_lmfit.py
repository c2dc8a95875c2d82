"""fixedopt.models against lmfit's loop and against the same model as a plain function
through fixedopt.curve_fit: spectra of two pseudo-Voigt peaks on a linear baseline.

Each spectrum (301 points) has its own known parameters (:data:`KNOWN`, each fixed at the
truth in about a third of the spectra), bounds and, in half of them, the tie ``p2_sigma
= p1_sigma``. fixedopt fits every spectrum in one call (its first call, the compile
included, and warm calls); lmfit's loop (``leastsq``) fits ``--lmfit-fits`` of them, its
time per fit scaled to the batch. The plain function fakes the tie as lmfit users do: an
11th parameter, a per-spectrum flag, always fixed (``p2_sigma`` fixed where it is set).
Equality on those fits: both sides at their defaults, and both with the exact Jacobian
(lmfit's ``Dfun``) and tolerances of 1e-15 (``docs/decisions.md``, "Equality with lmfit").

    python -m benchmarks.models_vs_lmfit --spectra 2000 --lmfit-fits 200 [--out DIR]

Writes ``<out>/<backend>-models_vs_lmfit-<date>.md``; the persistent compilation cache
is off (``FIXEDOPT_CACHE=off``): the first calls compile.
"""

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
TRUTH = ((8, 12), (9, 11), (0.8, 1.2), (0.2, 0.8), (4, 8), (17.5, 18.5), (1.2, 1.8), (0.2, 0.8),
         (-0.02, 0.04), (0.3, 0.7))  # fmt: skip  # each parameter's U(low, high)
KNOWN = ("p1_fraction", "p2_fraction", "p2_center", "slope")
BOUNDED = {"p1_amplitude": (0, np.inf), "p2_amplitude": (0, np.inf), "p1_sigma": (0, np.inf),
           "p2_sigma": (0, np.inf), "p1_fraction": (0, 1), "p2_fraction": (0, 1)}  # fmt: skip
TIGHT = {"ftol": 1e-15, "xtol": 1e-15, "gtol": 1e-15}


def spectra(count: int, seed: int = 0):
    """Truth ``(count, 10)``, data, the known mask ``(count, 10)`` and the tie flags."""
    rng = np.random.default_rng(seed)
    truth = np.column_stack([rng.uniform(low, high, count) for low, high in TRUTH])
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


def parameters(model, truth, known, tie):
    """``model``'s parameters (lmfit's for one spectrum, fixedopt's for all): the known
    ones fixed at the truth, the others from ``START``, the bounds, ``p2_sigma``'s ``tie``."""
    params = model.make_params(**dict(zip(NAMES, START)))
    for i, name in enumerate(NAMES):
        value, vary = np.where(known[..., i], truth[..., i], START[i]), ~known[..., i]
        params[name].set(value=value.tolist(), vary=vary.tolist())
        if name in BOUNDED:
            params[name].set(min=BOUNDED[name][0], max=BOUNDED[name][1])
    params["p2_sigma"].set(expr=tie)
    return params


def models_call(truth, data, known, tied, **options):
    model = PseudoVoigtModel(prefix="p1_") + PseudoVoigtModel(prefix="p2_") + LinearModel()
    params = parameters(model, truth, known, ["p1_sigma" if t else None for t in tied])
    x = jnp.asarray(X)
    return lambda: model.fit(data, params, x=x, **options)


def curve_fit_call(truth, data, known, tied):
    start = np.column_stack([np.where(known, truth, START), tied])
    fixed = np.column_stack([known, np.ones(len(data), bool)])
    fixed[:, NAMES.index("p2_sigma")] |= tied
    bounds = np.array([BOUNDED.get(n, (-np.inf, np.inf)) for n in (*NAMES, "tie")]).T
    inputs = jnp.asarray(X), jnp.asarray(data), jnp.asarray(start)
    call = lambda: fixedopt.curve_fit(plain, *inputs, bounds=tuple(bounds), fixed=fixed,
                                      batched=True, result=True)  # fmt: skip
    return lambda: jax.block_until_ready(call())


def lmfit_loop(truth, data, known, tied, count, exact=False):
    """lmfit's fits of the first ``count`` spectra: at its defaults, or (``exact``) with
    the exact Jacobian as ``Dfun`` and tolerances of 1e-15."""
    model = lmfit.models.PseudoVoigtModel(prefix="p1_")
    model = model + lmfit.models.PseudoVoigtModel(prefix="p2_") + lmfit.models.LinearModel()
    fit_kws = {"Dfun": lmfit_jacobian, **TIGHT} if exact else {}
    tie = lambda row: "p1_sigma" if tied[row] else None
    return [model.fit(data[row], parameters(model, truth[row], known[row], tie(row)), x=X,
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


def numbers(fits) -> np.ndarray:
    """Values and standard errors ``(2, fits, 10)``, of lmfit's results (a list) or fixedopt's."""
    if isinstance(fits, list):
        return np.array([[[f.params[n].value for n in NAMES] for f in fits],
                         [[f.params[n].stderr or 0.0 for n in NAMES] for f in fits]])  # fmt: skip
    values, errors = fits.best_values, fits.stderr
    return np.array([[values[n] for n in NAMES], [errors[n] for n in NAMES]]).swapaxes(1, 2)


def agreement(ours, theirs, tied) -> dict:
    """Differences to the reference ``theirs`` where it reports an error, for all the
    parameters and for the tied ``p2_sigma`` alone: the values in its standard errors
    (max, median) and relative to the value (max), the errors relative (max)."""
    reference, reference_error = numbers(theirs)
    value, error = numbers(ours)[:, : len(reference)]
    counted = reference_error != 0
    is_tied = counted & tied[: len(reference), None] & (np.array(NAMES) == "p2_sigma")
    with np.errstate(divide="ignore", invalid="ignore"):
        distance = np.abs(value - reference)
        d = np.stack([distance / reference_error, distance / np.abs(reference),
                      np.abs(error / reference_error - 1)], axis=-1)  # fmt: skip
    out: dict = {"fits": len(reference), "tied_fits": int(is_tied.sum())}
    for key, mask in (("all", counted), ("tied", is_tied)):
        far, relative, errors = d[mask].T
        out[key] = (far.max(), np.median(far), relative.max(), errors.max())
    return out


def warm_up() -> None:
    """A tiny unrelated fit (a line through 5 points, 2 rows, bounds, one fixed entry): the
    process's one-time costs (the first traces of fixedopt's shared helpers) are paid here,
    so that neither timed first call (models' runs first) pays them."""
    x = np.arange(5.0)
    y, start, fixed = np.stack([2 * x + 1, 3 - x]), np.ones((2, 2)), np.eye(2, dtype=bool)
    out = fixedopt.curve_fit(lambda x, a, b: a * x + b, x, y, start, bounds=(-9.0, 9.0),
                             fixed=fixed, batched=True, result=True)  # fmt: skip
    jax.block_until_ready(out)


def measure(spectra_count: int, lmfit_fits: int, rounds: int) -> dict:
    inputs = spectra(spectra_count)
    calls = {"models": models_call(*inputs), "curve_fit": curve_fit_call(*inputs)}
    warm_up()
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


COMPARED = {  # the rows of the equality table
    "fixedopt default": "fixedopt's defaults (exact Jacobian; gtol = xtol = sqrt(eps), ftol = eps)",
    "fixedopt tight": "fixedopt, tolerances 1e-15",
    "lmfit default": "lmfit's default (leastsq: forward differences, ftol = xtol = 1.5e-8)",
    "lmfit exact, tight": "lmfit leastsq, exact Jacobian (`Dfun`), tolerances 1e-15",
}
PAIRS = (("fixedopt default", "lmfit default"), ("fixedopt tight", "lmfit exact, tight"),
         ("fixedopt default", "lmfit exact, tight"))  # fmt: skip


def equality_row(label: str, found: dict) -> str:
    ours, theirs = label.split(" vs ")
    (far, median, relative, errors), tied = found["all"], found["tied"]
    return (f"| {COMPARED[ours]} vs {COMPARED[theirs]} | {found['fits']} | {far:.2g} "
            f"({median:.2g}) | {relative:.2g} | {errors:.2g} | {tied[0]:.2g} / {tied[3]:.2g} "
            f"({found['tied_fits']} fits) |")  # fmt: skip


def markdown(r: dict, env: dict) -> list[str]:
    lmfit_s, rows = r["lmfit_batch_s"], []
    for key, name in (("models", "fixedopt.models"), ("curve_fit", "curve_fit plain function")):
        rows += [(f"{name}, first call (compile {r[f'{key}_compile_s']:.2f} s)",
                  r[f"{key}_first_call_s"]),
                 (f"{name}, warm (median of {r['rounds']})", r[f"{key}_warm_s"])]  # fmt: skip
    return [
        f"# fixedopt.models vs lmfit and vs curve_fit ({env['backend']}, {env['date']})", "",
        f"{r['spectra']} spectra, 2 pseudo-Voigts + a line (10 parameters, 301 points), "
        "per-spectrum known parameters, bounds, `p2_sigma = p1_sigma` in half. "
        f"lmfit's loop timed on {r['lmfit_fits']} fits and scaled. Both first calls follow a "
        "tiny unrelated fit (the process's one-time costs). Device "
        f"{env['device']}, {env['host_cpus']} CPUs (shared with other jobs: ratios are noisy).",
        "", "| | seconds | vs lmfit's loop |", "|---|---|---|",
        f"| lmfit loop (leastsq), scaled to the batch | {lmfit_s:.2f} | 1 |",
        *(f"| {label} | {s:.3g} | {lmfit_s / s:.3g}x |" for label, s in rows),
        "",
        f"models / plain function: warm {r['models_warm_s'] / r['curve_fit_warm_s']:.3f}, "
        f"first call {r['models_first_call_s'] / r['curve_fit_first_call_s']:.3f}. "
        f"Converged: {r['converged']} of {r['spectra']}.", "",
        f"## Equality (lmfit: the first {r['lmfit_fits']} spectra)", "",
        "| compared | fits | values: max (median) distance, in the reference's standard "
        "errors | values: max relative | errors: max relative | tied `p2_sigma`: values "
        "(in its errors) / errors, max relative |", "|---|---|---|---|---|---|",
        *(equality_row(label, found) for label, found in r["agreement"].items()), "",
        "Parameters are counted where the reference reports an error (fixed ones are left "
        "out). A value near 0 (the slope) has a large relative difference for any method; "
        "the distance in standard errors is the measure. The gap at lmfit's defaults is "
        "lmfit's: its forward-difference Jacobian, and MINPACK's stop at ftol = xtol = 1.5e-8 "
        "with the covariance of the last Jacobian it evaluated (the decision "
        "\"Equality with lmfit\" in `docs/decisions.md`).", "",
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
    stem = args.out / f"{env['backend']}-models_vs_lmfit-{env['date']}"
    write_markdown(stem, markdown(record, env))


if __name__ == "__main__":
    main()
