"""``python -m benchmarks.search_carry [--rounds R]``: the line search's loop carry leaf by
leaf (fixedopt) against packed, one array per dtype, as the lanes pack their states
(``fixedopt._driver.packing``): fewer arrays written per trial, so fewer kernels; is it
faster?

quad B = 1024, n = 8 (``benchmarks.problems.quad``), ``minimize`` with the benchmarks'
settings (``methods.fixedopt_call``: L-BFGS defaults, Hager–Zhang at this n), and TFP's
batched L-BFGS, in one process: each fixedopt variant traced and compiled once (the
solvers' inner loops, ``Implicit.loop``, replaced while it traces), then all called in
interleaved rounds, medians. Variants: ``leaves`` (as fixedopt runs), ``scalars`` (the
carry's per-row scalars packed), ``all`` (its vectors too). Prints the table; the
kernels of the Hager–Zhang loop's body are counted from the compiled HLO. Writes
``benchmarks/results/<backend>-search-carry-<date>.md``.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import statistics
import time

import jax

jax.config.update("jax_enable_x64", True)

from benchmarks import methods  # noqa: E402
from benchmarks.problems import quad  # noqa: E402
from benchmarks.timing import environment, interleaved  # noqa: E402
from fixedopt._derivatives import differentiation  # noqa: E402
from fixedopt._driver.packing import Packing  # noqa: E402


def packed_loop(vectors: bool):
    """``Implicit.loop`` with its carry (one row's tree) packed while it goes round."""

    def loop(self, condition, body, state, max_trips):
        one = lambda tree: jax.tree.map(lambda a: a[None], tree)
        packing = Packing.of(one(state), vectors=vectors)
        pack = lambda tree: packing.pack(one(tree))
        unpack = lambda arrays: jax.tree.map(lambda a: a[0], packing.unpack(arrays))
        final = jax.lax.while_loop(lambda p: condition(unpack(p)),
                                   lambda p: pack(body(unpack(p))), pack(state))  # fmt: skip
        return unpack(final)

    return loop


RESULTS = pathlib.Path(__file__).parent / "results"
VARIANTS = {"leaves": differentiation.Implicit.loop, "scalars": packed_loop(False),
            "all": packed_loop(True)}  # fmt: skip


def search_kernels(hlo: str) -> int:
    """Kernels (fusions and unfused ops) in the body of the loop that evaluates the
    objective inside a while body: the line search's, the largest inner loop here."""
    blocks = {block.split(" ", 1)[0].lstrip("%"): block for block in re.split(r"\n(?=%)", hlo)}
    counts = []
    for body in re.findall(r"while\(.*?body=%([\w.\-]+)", hlo):
        ops = re.findall(r"^\s*(?:ROOT )?%\S+ = \S+ ([a-z][\w\-]*)\(", blocks.get(body, ""), re.M)
        counts.append(sum(op not in ("parameter", "get-tuple-element", "constant", "tuple",
                                     "bitcast") for op in ops))  # fmt: skip
    return sorted(counts)[-2]  # the largest is the lanes' trip; then the search


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.search_carry")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    problem, settings = quad(1024, 8).with_mask(1), methods.Settings()
    call, inputs = methods.fixedopt_call(problem, settings)
    programs, compile_s, kernels = {}, {}, {}
    for name, loop in VARIANTS.items():
        jax.clear_caches()
        differentiation.Implicit.loop = loop
        try:
            tic = time.perf_counter()
            programs[name] = jax.jit(call).lower(*inputs).compile()
            compile_s[name] = time.perf_counter() - tic
        finally:
            differentiation.Implicit.loop = VARIANTS["leaves"]
        kernels[name] = search_kernels(programs[name].as_text())
    calls = {name: (lambda p=p: jax.block_until_ready(p(*inputs))) for name, p in programs.items()}
    calls["tfp"] = methods.tfp_lbfgs(problem, settings).call
    for run in calls.values():
        run()
    times, _ = interleaved(calls, args.rounds)
    median = {name: statistics.median(samples) for name, samples in times.items()}
    env = environment()
    stem = RESULTS / f"{env['backend']}-search-carry-{env['date']}"
    lines = [f"# {stem.name}", "", __doc__.split("\n\n")[1], "",
             f"Backend {env['backend']} ({env['host_cpus']} CPUs), jax {env['versions']['jax']}, "
             f"{args.rounds} rounds. `python -m benchmarks.search_carry`.", "",
             "| variant | ms | leaves' time / this | TFP's time / this | search kernels "
             "| compile s |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for name in calls:
        extra = f"{kernels[name]} | {compile_s[name]:.2f}" if name in programs else " | "
        lines.append(f"| {name} | {median[name] * 1e3:.2f} | {median['leaves'] / median[name]:.3f}x"
                     f" | {median['tfp'] / median[name]:.3f}x | {extra} |")  # fmt: skip
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
