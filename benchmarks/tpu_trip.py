"""Study (issue 61): what one L-BFGS trip of ``minimize`` runs on a TPU at small n.

For quad/rosen at n = 8 (B = 16,384, float32, the tpu_peers settings), variants of the
solve, each compiled in this process: its compile seconds, the optimized program's
size (instructions, computations, while loops, conditionals, fusions, gathers,
scatters, dynamic slices; the largest computations), its median time of 5 calls, its
steps and statuses. Variants (``VARIANTS``, comma-separated): ``default``; ``whole``
(lanes >= B); ``unrolled`` (the two-loop recursion unrolled over its memory);
``whole-unrolled``; ``major`` / ``minor`` in a name: the lanes' carry rows-first
/ rows-last (``Backend.minor_rows``). ``CASES``: ``quad8,rosen8,...``. The optimized HLO of each
variant is written gzipped to ``$OUT`` (or ``--out``).

    VARIANTS=default,unrolled CASES=quad8 python -m benchmarks.tpu_trip --out /tmp/trip
"""

import argparse
import collections
import gzip
import os
import pathlib
import re
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt
from benchmarks.methods import GTOL, WHOLE_BATCH, Settings, fixedopt_call, jitted
from fixedopt.testing_problems import BATCHED

QUICK_BATCH = {8: 64, 64: 32, 512: 8}
BATCH = QUICK_BATCH if os.environ.get("QUICK") else {8: 16_384, 64: 16_384, 512: 2_048}
OPS = ("while", "conditional", "fusion", "gather", "scatter", "dynamic-slice",
       "dynamic-update-slice", "copy", "transpose", "custom-call", "all-reduce")  # fmt: skip


def hlo_stats(text: str) -> dict:
    """Counts of the optimized HLO's instructions, by opcode, and its largest computations."""
    sizes: dict[str, int] = {}
    ops: collections.Counter = collections.Counter()
    current = None
    for line in text.splitlines():
        head = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$", line)
        if head and not line.startswith(" "):
            current = head.group(1)
            sizes[current] = 0
            continue
        opcode = _opcode(line)
        if opcode and current is not None:
            sizes[current] += 1
            ops[opcode] += 1
    largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:12]
    return {"instructions": sum(sizes.values()), "computations": len(sizes),
            "ops": {op: ops[op] for op in OPS}, "largest": largest}  # fmt: skip


def _opcode(line: str) -> str | None:
    """The opcode of an HLO instruction's line (None: not one)."""
    _, sep, rest = line.partition(" = ")
    if not sep:
        return None
    if rest.startswith("("):  # a tuple shape: skip to its closing parenthesis
        depth = 0
        for i, char in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0:
                rest = rest[i + 1 :]
                break
    else:
        rest = rest.partition(" ")[2]
    found = re.match(r"\s*([a-z][a-z0-9\-]*)\(", rest)
    return found.group(1) if found else None


def unrolled_two_loop(grad, s_history, y_history, rho, newest, gamma, read=None, write=None):
    """The two-loop recursion unrolled over its memory: the ring rotated once (newest
    last) by one dynamic slice of it doubled, then static slices."""
    memory = s_history.shape[0]
    start = jax.lax.rem(jnp.asarray(newest) + 1, memory)

    def ordered(a):  # oldest first
        return jax.lax.dynamic_slice_in_dim(jnp.concatenate([a, a]), start, memory)

    s, y, r = ordered(s_history), ordered(y_history), ordered(rho)
    q, alphas = grad, []
    for j in reversed(range(memory)):
        alpha = r[j] * jnp.sum(s[j] * q)
        q = q - alpha * y[j]
        alphas.append(alpha)
    out = gamma * q
    for j in range(memory):
        correction = alphas[memory - 1 - j] - r[j] * jnp.sum(y[j] * out)
        out = out + correction * s[j]
    return out


def variant_options(name: str) -> dict:
    from fixedopt._driver import engine, machine
    from fixedopt._solvers import lbfgs

    engine.clear_compiled()
    jax.clear_caches()
    backend = jax.default_backend()
    machine.BACKENDS[backend] = ORIGINAL_BACKENDS[backend]
    if "major" in name or "minor" in name:  # the rows' axis in the lanes' carry
        tuned = machine.BACKENDS[backend]
        machine.BACKENDS[backend] = tuned._replace(minor_rows="minor" in name)
    lbfgs.two_loop = ORIGINAL_TWO_LOOP
    if "unrolled" in name:
        lbfgs.two_loop = unrolled_two_loop
    return {"lanes": WHOLE_BATCH} if name.startswith("whole") else {}


def run(case: str, name: str, out: pathlib.Path) -> dict:
    problem_name, n = re.match(r"([a-z]+)(\d+)", case).groups()
    n = int(n)
    problem = BATCHED[problem_name](BATCH[n], n, 0, "float32")
    settings = Settings(GTOL["float32"], 5000)
    options = variant_options(name)
    call, inputs = fixedopt_call(problem, settings, **options)
    solve = jitted(call)
    start = time.perf_counter()
    lowered = solve.lower(*inputs)
    lowered_s = time.perf_counter() - start
    start = time.perf_counter()
    compiled = lowered.compile()
    compile_s = time.perf_counter() - start
    text = compiled.as_text()
    if case in os.environ.get("HLO_CASES", "quad8").split(","):
        with gzip.open(out / f"hlo_{case}_{name}.txt.gz", "wt") as f:
            f.write(text)
    solution = jax.block_until_ready(compiled(*inputs))
    times = []
    for _ in range(5):
        start = time.perf_counter()
        solution = jax.block_until_ready(compiled(*inputs))
        times.append(time.perf_counter() - start)
    codes, counts = np.unique(np.asarray(solution.status), return_counts=True)
    statuses = " ".join(f"{fixedopt.Status(int(c)).name}:{k}" for c, k in zip(codes, counts))
    steps = np.asarray(solution.steps)
    return {"case": case, "variant": name, "B": BATCH[n], "lower_s": round(lowered_s, 2),
            "compile_s": round(compile_s, 2), "median_ms": round(1e3 * statistics.median(times), 3),
            "min_ms": round(1e3 * min(times), 3), "steps_mean": round(float(steps.mean()), 3),
            "steps_max": int(steps.max()), "statuses": statuses, **hlo_stats(text)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print("jax", jax.__version__, jax.devices(), flush=True)
    cases = os.environ.get("CASES", "quad8").split(",")
    variants = os.environ.get("VARIANTS", "default,unrolled,whole,whole-unrolled").split(",")
    with open(out / "trip.txt", "a") as log:
        for case in cases:
            for name in variants:
                record = run(case, name, out)
                print(record, flush=True)
                log.write(repr(record) + "\n")
                log.flush()


if __name__ == "__main__":
    from fixedopt._solvers import lbfgs as _lbfgs

    ORIGINAL_TWO_LOOP = _lbfgs.two_loop
    from fixedopt._driver import machine as _machine

    ORIGINAL_BACKENDS = dict(_machine.BACKENDS)
    jax.config.update("jax_enable_compilation_cache", False)
    main()
