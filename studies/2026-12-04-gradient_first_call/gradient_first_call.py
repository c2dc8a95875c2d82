"""``python -m benchmarks.gradient_first_call [--repeats N] [--label L]``: the first
``jax.grad`` through a solve against the solve's own first call (issue 40, item 5).

The model is ``benchmarks.first_call``'s spectra case, one row: two pseudo-Voigt peaks
and a linear baseline (8 parameters, 301 points, float64), ``least_squares`` with its
defaults; the gradient is ``jax.grad`` of the fitted first centre with respect to the
data. Each repeat is a fresh process without a persistent compilation cache
(``FIXEDOPT_CACHE=0``) that times, after a small warm-up fit:

- ``forward``: the first call of a model no one compiled (a new Lorentzian fraction);
- ``gradient``: the first ``jax.grad`` of another new model, nothing compiled before
  (the forward solve and the derivative);
- ``gradient after forward``: the first ``jax.grad`` of the first model, whose forward
  solve ran already (a notebook's fit, then its derivative).

A last process compiles the gradient with XLA dumping its optimized programs and
counts what each holds (instructions, while loops, fusions). Medians over repeats.
The script imports only ``fixedopt``, so ``PYTHONPATH=<another checkout>`` measures that
code (how the "before" column was taken).

Writes ``benchmarks/results/<backend>-gradient-first-call[-label]-<date>.{json,md}``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import fixedopt  # noqa: E402

RESULTS = pathlib.Path(__file__).parent / "results"
X = np.linspace(0.0, 30.0, 301)
TRUTH = np.array([40.0, 11.0, 1.2, 25.0, 18.0, 1.6, 0.05, 2.0])


def residual_of(fraction: float):
    """The spectra residual with a Lorentzian fraction of ``fraction`` (a new
    constant: a model no process has compiled)."""

    def pvoigt(a, c, s):
        g = jnp.exp(-((X - c) ** 2) / (2 * s**2)) / (s * jnp.sqrt(2 * jnp.pi))
        lorentz = s / (jnp.pi * ((X - c) ** 2 + s**2))
        return a * (fraction * lorentz + (1.0 - fraction) * g)

    def residual(p, y):
        return pvoigt(p[0], p[1], p[2]) + pvoigt(p[3], p[4], p[5]) + p[6] * X + p[7] - y

    return residual


def centre_of(residual):
    p0 = jnp.asarray(TRUTH * np.linspace(0.9, 1.1, 8))
    return lambda y: fixedopt.least_squares(residual, p0, jnp.zeros(8, bool), args=(y,)).x[1]


def first(call) -> float:
    start = time.perf_counter()
    jax.block_until_ready(call())
    return time.perf_counter() - start


def child(seed: float) -> dict:
    rng = np.random.default_rng(0)
    y = jnp.asarray(residual_of(0.37)(TRUTH, 0.0) + rng.normal(0.0, 0.2, X.size))
    warm = lambda p, y: p - y
    jax.block_until_ready(
        fixedopt.least_squares(warm, jnp.zeros(2), jnp.zeros(2, bool), args=(y[:2],)).x
    )
    forward_model, gradient_model = residual_of(seed), residual_of(seed + 0.01)
    record = {"forward_s": first(lambda: centre_of(forward_model)(y))}
    record["gradient_s"] = first(lambda: jax.grad(centre_of(gradient_model))(y))
    record["gradient_after_forward_s"] = first(lambda: jax.grad(centre_of(forward_model))(y))
    return record


def run_child(seed: float, dump: str | None = None) -> dict:
    env = dict(os.environ, FIXEDOPT_CACHE="0")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    if dump:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_dump_to={dump} --xla_dump_hlo_as_text"
    command = [sys.executable, __file__, "--child", str(seed)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def programs(seed: float) -> list[dict]:
    """What each optimized program of a gradient holds (the solve's and the rule's)."""
    with tempfile.TemporaryDirectory() as dump:
        run_child(seed, dump)
        found = []
        for path in sorted(pathlib.Path(dump).glob("*after_optimizations.txt")):
            text = path.read_text()
            count = len(re.findall(r"^\s+(?:ROOT )?\S+ = ", text, re.MULTILINE))
            if count < 200:  # the warm-up's and JAX's small programs
                continue
            found.append({
                "module": path.name.split(".")[0] + "." + path.name.split(".")[1],
                "instructions": count,
                "while_loops": len(re.findall(r" while\(", text)),
                "fusions": len(re.findall(r" fusion\(", text)),
            })  # fmt: skip
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--label", default="")
    parser.add_argument("--child", type=float, default=None)
    options = parser.parse_args()
    if options.child is not None:
        print(json.dumps(child(options.child)))
        return
    runs = [run_child(0.3 + 0.02 * i) for i in range(options.repeats)]
    median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    median["ratio"] = median["gradient_s"] / median["forward_s"]
    result = {"runs": runs, "median": median, "programs": programs(0.29),
              "label": options.label, "load": os.getloadavg()}  # fmt: skip
    stem = "-".join(filter(None, [jax.default_backend(), "gradient-first-call", options.label,
                                  datetime.date.today().isoformat()]))  # fmt: skip
    (RESULTS / f"{stem}.json").write_text(json.dumps(result, indent=1))
    load = ", ".join(f"{x:.1f}" for x in result["load"])
    lines = [
        f"Medians of {options.repeats} fresh processes, no persistent cache; load average "
        f"at the end {load} (2 cores, shared).",
        "",
        "| forward first (s) | gradient first (s) | ratio | gradient after forward (s) |",
        "|---|---|---|---|",
        f"| {median['forward_s']:.2f} | {median['gradient_s']:.2f} | {median['ratio']:.2f} "
        f"| {median['gradient_after_forward_s']:.2f} |",
        "",
        "| program | instructions | while loops | fusions |",
        "|---|---|---|---|",
        *(
            f"| {p['module']} | {p['instructions']} | {p['while_loops']} | {p['fusions']} |"
            for p in result["programs"]
        ),
    ]
    (RESULTS / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
