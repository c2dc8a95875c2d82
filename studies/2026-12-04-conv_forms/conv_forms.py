"""``python -m benchmarks.conv_forms``: what one evaluation of the deblur objective's
value and gradient costs, per way of writing its per-image blur (16 images 64x64, each
its own 7x7 kernel; the deblur suite's ``vectorized=True`` objective): one grouped
``lax.conv_general_dilated`` (images as channels, ``feature_group_count``), the same in
channels-last layout, images as a batch with ``batch_group_count``, 49 shifted copies of
the image (elementwise arithmetic) and zero-padded FFTs. float64 and float32, medians
of interleaved calls, compile apart; every form checked against the shifted sum.

It tells whether a slow deblur solve is the solver's or the convolution's: the solver
evaluates the objective a few times a step whatever form it takes.

Writes ``benchmarks/results/<backend>-conv-forms-<date>.md``.
"""

from __future__ import annotations

import pathlib
import statistics

import jax
import jax.numpy as jnp

from benchmarks import timing
from benchmarks.deblur import KERNEL, SIZE, fft_blur, grouped_blur, images, shifted_blur

RESULTS = pathlib.Path(__file__).parent / "results"
IMAGES, REPEATS = 16, 21


def grouped_channels_last(x, kernel):
    """The same convolution, channels last (the layout XLA:CPU's kernels prefer)."""
    images_last = jnp.moveaxis(x, 0, -1)[None]
    filters = jnp.moveaxis(kernel[:, ::-1, ::-1], 0, -1)[:, :, None, :]
    out = jax.lax.conv_general_dilated(
        images_last, filters, (1, 1), "SAME",
        feature_group_count=x.shape[0], dimension_numbers=("NHWC", "HWIO", "NHWC"),
    )[0]  # fmt: skip
    return jnp.moveaxis(out, -1, 0)


def batch_grouped(x, kernel):
    """Images as a batch of one-channel inputs, split into groups of one filter each."""
    return jax.lax.conv_general_dilated(
        x[:, None], kernel[:, None, ::-1, ::-1], (1, 1), "SAME",
        batch_group_count=x.shape[0], dimension_numbers=("NCHW", "OIHW", "NCHW"),
    )[0]  # fmt: skip


FORMS = {"conv_general_dilated, feature groups (NCHW)": grouped_blur,
         "conv_general_dilated, feature groups (NHWC)": grouped_channels_last,
         "conv_general_dilated, batch groups": batch_grouped,
         "49 shifted copies": shifted_blur, "zero-padded FFT": fft_blur}  # fmt: skip


def measure(dtype) -> list[dict]:
    """Per form: compile seconds, median value-and-gradient seconds, max |difference|."""
    _, data, kernels, _, start = images(IMAGES)
    x, y, k = (jnp.asarray(a, dtype) for a in (start, data, kernels))
    reference = shifted_blur(x, k)
    calls, rows = {}, []
    for name, blur in FORMS.items():

        def objective(x, blur=blur):
            return 0.5 * jnp.sum((blur(x, k) - y) ** 2)

        compiled = jax.jit(jax.value_and_grad(objective))
        first = timing.first_call(lambda compiled=compiled: jax.block_until_ready(compiled(x)))
        difference = float(jnp.max(jnp.abs(blur(x, k) - reference)))
        calls[name] = lambda compiled=compiled: jax.block_until_ready(compiled(x))
        rows.append({"form": name, "compile_s": first["compile_s"], "difference": difference})
    times, _ = timing.interleaved(calls, REPEATS)
    shifted = statistics.median(times["49 shifted copies"])
    for row in rows:
        row["ms"] = 1e3 * statistics.median(times[row["form"]])
        row["vs_shifted"] = row["ms"] / (1e3 * shifted)
    return rows


def per_group_count(counts=(1, 2, 4, 8, 16, 32, 64)) -> list[tuple[int, float]]:
    """``(images, ms per image)`` of the grouped convolution's value and gradient
    (float64, NCHW), for growing numbers of images (groups), interleaved."""
    calls = {}
    for count in counts:
        x, k = jnp.ones((count, SIZE, SIZE)), jnp.ones((count, KERNEL, KERNEL))
        objective = lambda x, k=k: 0.5 * jnp.sum(grouped_blur(x, k) ** 2)
        compiled = jax.jit(jax.value_and_grad(objective))
        jax.block_until_ready(compiled(x))
        calls[count] = lambda compiled=compiled, x=x: jax.block_until_ready(compiled(x))
    times, _ = timing.interleaved(calls, REPEATS)
    return [(count, 1e3 * statistics.median(times[count]) / count) for count in counts]


def main() -> pathlib.Path:
    jax.config.update("jax_enable_x64", True)
    env = timing.environment()
    stem = RESULTS / f"{env['backend']}-conv-forms-{env['date']}"
    lines = [f"# {stem.name}", "",
             f"Value and gradient of `0.5 |blur(x) - y|^2` for {IMAGES} images "
             f"{SIZE}x{SIZE}, each its own {KERNEL}x{KERNEL} kernel (the deblur suite's "
             f"vectorized objective); median of {REPEATS} interleaved calls, compile apart; "
             "`difference`: max |blur - shifted sum| over the images. Backend "
             f"{env['backend']}, jax {env['versions'].get('jax')}. "
             "`python -m benchmarks.conv_forms`.", "",
             "| dtype | form | ms | x shifted | compile_s | difference |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for dtype in (jnp.float64, jnp.float32):
        for row in measure(dtype):
            lines.append(f"| {jnp.dtype(dtype).name} | {row['form']} | {row['ms']:.2f} | "
                         f"{row['vs_shifted']:.1f} | {row['compile_s']:.2f} | "
                         f"{row['difference']:.1e} |")  # fmt: skip
    lines += ["", "The grouped convolution per number of images (groups), float64, NCHW:", "",
              "| images | ms per image |", "|---|---|"]  # fmt: skip
    lines += [f"| {count} | {ms:.2f} |" for count, ms in per_group_count()]
    lines += ["", f"- {env['host_cpus']} host CPUs; versions: {env['versions']}."]
    return timing.write_markdown(stem, lines)


if __name__ == "__main__":
    main()
