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


def models_call(truth, data, known, tied):
    model = PseudoVoigtModel(prefix="p1_") + PseudoVoigtModel(prefix="p2_") + LinearModel()
    params = model.make_params(**dict(zip(NAMES, START)))
    for i, name in enumerate(NAMES):
        params[name].set(value=np.where(known[:, i], truth[:, i], START[i]), vary=~known[:, i])
        if name in BOUNDED:
            params[name].set(min=BOUNDED[name][0], max=BOUNDED[name][1])
    params["p2_sigma"].set(expr=["p1_sigma" if t else None for t in tied])
    x = jnp.asarray(X)

    def call():
        result = model.fit(data, params, x=x)
        return result

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


def lmfit_loop(truth, data, known, tied, count):
    model = lmfit.models.PseudoVoigtModel(prefix="p1_")
    model = model + lmfit.models.PseudoVoigtModel(prefix="p2_") + lmfit.models.LinearModel()
    results = []
    for row in range(count):
        params = model.make_params(**dict(zip(NAMES, START)))
        for i, name in enumerate(NAMES):
            if known[row, i]:
                params[name].set(value=truth[row, i], vary=False)
            if name in BOUNDED:
                params[name].set(min=BOUNDED[name][0], max=BOUNDED[name][1])
        if tied[row]:
            params["p2_sigma"].set(expr="p1_sigma")
        results.append(model.fit(data[row], params, x=X))
    return results


def agreement(ours, theirs):
    """Largest differences to lmfit: values in units of lmfit's errors, errors relative."""
    distance, error_ratio = [], []
    for row, fit in enumerate(theirs):
        for name in NAMES:
            p = fit.params[name]
            if p.stderr:
                distance.append(abs(ours.best_values[name][row] - p.value) / p.stderr)
                error_ratio.append(abs(ours.stderr[name][row] / p.stderr - 1))
    return float(np.max(distance)), float(np.median(distance)), float(np.max(error_ratio))


def measure(spectra_count: int, lmfit_fits: int, rounds: int) -> dict:
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
    worst, median, errors = agreement(outputs["models"], reference)
    result = outputs["models"]
    return {
        "spectra": spectra_count, "lmfit_fits": lmfit_fits, "rounds": rounds,
        "models_first_s": firsts["models"]["first_call_s"],
        "models_compile_s": firsts["models"]["compile_s"],
        "curve_fit_first_s": firsts["curve_fit"]["first_call_s"],
        "curve_fit_compile_s": firsts["curve_fit"]["compile_s"],
        "models_warm_s": warm["models"], "curve_fit_warm_s": warm["curve_fit"],
        "lmfit_per_fit_s": lmfit_per_fit, "lmfit_batch_s": lmfit_per_fit * spectra_count,
        "converged": int(result.success.sum()),
        "max_value_diff_over_lmfit_stderr": worst, "median_value_diff_over_lmfit_stderr": median,
        "max_stderr_rel_diff_vs_lmfit": errors,
    }  # fmt: skip


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
        f"first call {r['models_first_s'] / r['curve_fit_first_s']:.3f}.",
        f"Converged: {r['converged']} of {r['spectra']}. Against lmfit's {r['lmfit_fits']} fits: "
        f"values within {r['max_value_diff_over_lmfit_stderr']:.2g} of lmfit's standard errors "
        f"(median {r['median_value_diff_over_lmfit_stderr']:.2g}); standard errors within "
        f"{r['max_stderr_rel_diff_vs_lmfit']:.2g} relative (lmfit's leastsq takes its errors "
        "from MINPACK's forward-difference Jacobian).",
        "", "Reproduce: `python -m benchmarks.models_vs_lmfit "
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
