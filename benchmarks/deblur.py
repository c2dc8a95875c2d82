"""The deblur suite: per-image deconvolution (16 images, 64x64, each with its own blur
kernel, 10% of the pixels known and fixed, pixels in [0, 1]) solved by scipy's L-BFGS-B
loop, by fixedopt with a per-row objective (``jax.scipy.signal.convolve2d`` under
``vmap``) and with ``vectorized=True`` (one grouped ``lax.conv_general_dilated`` over
the lane batch), and with the blur written as 49 shifted copies of the image, per row
and vectorized; same tolerance (max |projected gradient| <= gtol), interleaved. What
one evaluation costs in each form, zero-padded FFTs included: ``docs/decisions.md``,
"Per-image blur forms on XLA:CPU"."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize
import scipy.signal
from jax.scipy.signal import convolve2d

import fixedopt
from benchmarks import timing

SIZE, KERNEL, REGULARIZATION = 64, 7, 1e-3


def images(batch: int, seed: int = 0):
    """Smooth true images, Gaussian kernels of random width, blurred noisy data."""
    rng = np.random.default_rng(seed)
    grid = np.arange(SIZE)
    truth = np.zeros((batch, SIZE, SIZE))
    for image in truth:
        for _ in range(6):
            cy, cx, width = rng.uniform(8, 56), rng.uniform(8, 56), rng.uniform(3, 8)
            image += 0.5 * np.exp(-((grid[:, None] - cy) ** 2 + (grid - cx) ** 2) / width**2)
    truth = np.clip(truth, 0.0, 1.0)
    offsets = np.arange(KERNEL) - KERNEL // 2
    widths = rng.uniform(1.0, 2.0, batch)
    kernels = np.exp(-(offsets[:, None] ** 2 + offsets**2)[None] / (2 * widths[:, None, None] ** 2))
    kernels /= kernels.sum(axis=(1, 2), keepdims=True)
    blurred = np.stack([scipy.signal.convolve2d(t, k, mode="same") for t, k in zip(truth, kernels)])
    data = blurred + rng.normal(0, 0.01, blurred.shape)
    fixed = rng.random(truth.shape) < 0.1
    start = np.where(fixed, truth, 0.5)
    return truth, data, kernels, fixed, start


def deconvolution(blur):
    """``0.5 |blur(x, k) - y|^2 + 0.5 lambda |x|^2`` per image: a value for one image
    ``(H, W)``, ``(rows,)`` values for a batch ``(rows, H, W)``."""

    def objective(x, data, kernel):
        residual = blur(x, kernel) - data
        squares = jnp.sum(residual**2, axis=(-2, -1))
        return 0.5 * squares + 0.5 * REGULARIZATION * jnp.sum(x**2, axis=(-2, -1))

    return objective


def grouped_blur(x, kernel):
    """All images of the lane batch at once: one grouped convolution."""
    flipped = kernel[:, None, ::-1, ::-1]  # convolve2d flips; conv_general_dilated does not
    return jax.lax.conv_general_dilated(
        x[None], flipped, (1, 1), "SAME", feature_group_count=x.shape[0],
        dimension_numbers=("NCHW", "OIHW", "NCHW"),
    )[0]  # fmt: skip


def shifted_blur(x, kernel):
    """``convolve2d(x, kernel, mode="same")`` as a sum of shifted copies of ``x``, for
    one image ``(H, W)`` or a batch ``(rows, H, W)`` (kernel ``(KERNEL, KERNEL)`` or
    ``(rows, KERNEL, KERNEL)``): elementwise arithmetic that XLA fuses."""
    half, flipped = KERNEL // 2, kernel[..., ::-1, ::-1]
    padded = jnp.pad(x, [(0, 0)] * (x.ndim - 2) + [(half, half)] * 2)
    terms = (flipped[..., i, j, None, None] * padded[..., i : i + SIZE, j : j + SIZE]
             for i in range(KERNEL) for j in range(KERNEL))  # fmt: skip
    return sum(terms)


def scipy_loop(data, kernels, fixed, start, gtol, max_steps):
    """scipy L-BFGS-B per image, fixed pixels as lb == ub, NumPy objective."""
    solutions = []
    for y, k, mask, x0 in zip(data, kernels, fixed, start):

        def fun(flat, y=y, k=k):
            x = flat.reshape(SIZE, SIZE)
            residual = scipy.signal.convolve2d(x, k, mode="same") - y
            grad = scipy.signal.correlate2d(residual, k, mode="same") + REGULARIZATION * x
            value = 0.5 * np.sum(residual**2) + 0.5 * REGULARIZATION * np.sum(x**2)
            return value, grad.ravel()

        flat0 = x0.ravel()
        bounds = list(zip(np.where(mask.ravel(), flat0, 0.0), np.where(mask.ravel(), flat0, 1.0)))
        options = {"gtol": gtol, "ftol": 0.0, "maxiter": max_steps, "maxfun": 4 * max_steps}
        result = scipy.optimize.minimize(fun, flat0, jac=True, method="L-BFGS-B", bounds=bounds,
                                         options=options)  # fmt: skip
        solutions.append(result.x.reshape(SIZE, SIZE))
    return np.stack(solutions)


def fixedopt_call(fun, vectorized: bool, gtol: float, max_steps: int):
    @jax.jit
    def solve(start, fixed, data, kernels):
        return fixedopt.minimize(
            fun, start, fixed, args=(data, kernels), bounds=(0.0, 1.0), batched=True,
            vectorized=vectorized, abs_gtol=gtol, gtol=0.0, ftol=0.0, xtol=0.0,
            max_steps=max_steps,
        )  # fmt: skip

    return solve


def run(quick: bool, args) -> list[dict]:
    """Times (median of interleaved repeats, compile apart) and agreement (quick: two
    images to gtol 1e-3, a smoke: its compiles are what it costs)."""
    batch, gtol, max_steps = (2, 1e-3, 300) if quick else (16, 1e-5, 5000)
    truth, data, kernels, fixed, start = images(batch)
    inputs = tuple(jnp.asarray(a) for a in (start, fixed, data, kernels))
    calls = {"scipy-lbfgsb-loop": lambda: scipy_loop(data, kernels, fixed, start, gtol, max_steps)}
    records = []
    variants = (("fixedopt-per-row", functools.partial(convolve2d, mode="same"), False),
                ("fixedopt-vectorized", grouped_blur, True),
                ("fixedopt-per-row-shifted", shifted_blur, False),
                ("fixedopt-vectorized-shifted", shifted_blur, True))  # fmt: skip
    for name, blur, vectorized in variants[:2] if quick else variants:  # quick: a smoke
        solve = fixedopt_call(deconvolution(blur), vectorized, gtol, max_steps)
        first = timing.first_call(lambda solve=solve: jax.block_until_ready(solve(*inputs)))
        calls[name] = lambda solve=solve: jax.block_until_ready(solve(*inputs))
        records.append({"method": name, **first})
    times, outputs = timing.interleaved(calls, 1 if quick else 3)
    reference = np.asarray(outputs["scipy-lbfgsb-loop"])
    scipy_time = timing.summary(times["scipy-lbfgsb-loop"])["time_median_s"]
    rows = [{"method": "scipy-lbfgsb-loop"}, *records]
    for record in rows:
        name = record["method"]
        output, summary = outputs[name], timing.summary(times[name])
        x = np.asarray(output if name.startswith("scipy") else output.x)
        record.update(kind="deblur", B=batch, size=SIZE, gtol=gtol, **summary)
        record["speedup_vs_scipy"] = scipy_time / summary["time_median_s"]
        record["max_abs_diff_vs_scipy"] = float(np.max(np.abs(x - reference)))
        record["rms_error_vs_truth"] = float(np.sqrt(np.mean((x - truth) ** 2)))
        record["fixed_bit_identical"] = bool(np.array_equal(x[fixed], start[fixed]))
        if not name.startswith("scipy"):
            record["steps_max"] = int(np.max(output.steps))
            record["converged"] = float(np.mean(output.converged))
    return rows
