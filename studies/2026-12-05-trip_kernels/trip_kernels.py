"""What one trip of the lanes' loop launches, counted in XLA's optimized program.

``PYTHONPATH=. python studies/2026-12-05-trip_kernels/trip_kernels.py [--out FILE]``

Each case runs in a child process that dumps XLA's optimized ``_solve`` program; the
program is parsed and its lanes ``while`` loop taken apart: the kernels its body runs
on every trip (fusions, custom calls, copies: every instruction but parameters, tuples,
their elements, constants and bitcasts), each nested loop's kernels per iteration (with
its trip count where XLA knows it: the L-BFGS two-loop recursion), and each ``cond``'s
branches (the refill; the certification). No timing: counts are the same on every run.
"""

import argparse
import json
import pathlib
import re
import subprocess
import sys
import tempfile

FREE = {"parameter", "get-tuple-element", "tuple", "constant", "bitcast", "after-all"}
CASES = ("spot", "spectra", "rk4", "quad8", "quad64", "quad512")


def child(case: str) -> None:
    """Run one case once (its program is dumped by XLA_FLAGS)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import fixedopt
    from benchmarks import first_call
    from fixedopt.testing_problems import quad, quad_jax

    if case.startswith("quad"):
        n = int(case[4:])
        batch = {8: 16384, 64: 16384, 512: 2048}[n]
        p = quad(batch, n)
        solution = fixedopt.minimize(quad_jax, p.x0, p.fixed, args=p.args, batched=True)
    else:
        builder = getattr(first_call, case)
        solution = builder(first_call.BATCHES[case][0])["call"]()
    jax.block_until_ready(solution)


def parse(text: str) -> tuple[dict[str, list[tuple[str, dict, str | None]]], str]:
    """The computations of an HLO module: name -> its instructions ``(op, called
    computations, known trip count)``; and the entry's name."""
    computations: dict[str, list] = {}
    current, entry = None, ""
    for line in text.splitlines():
        header = re.match(r"^(ENTRY )?%(\S+) .*\{$", line)
        if header:
            current = header.group(2)
            computations[current] = []
            entry = current if header.group(1) else entry
        elif line.startswith("}"):
            current = None
        elif current is not None:
            op = re.match(r"^\s+(?:ROOT )?%\S+ = .*? ([a-z][\w-]*)\(", line)
            if op:
                calls = dict(re.findall(r"(body|condition)=%([\w.\-]+)", line))
                branches = re.search(r"branch_computations=\{([^}]*)\}", line)
                if branches:
                    calls["branches"] = [
                        b.strip().lstrip("%") for b in branches.group(1).split(",")
                    ]
                trips = re.search(r'"known_trip_count":\{"n":"(\d+)"', line)
                computations[current].append((op.group(1), calls, trips and trips.group(1)))
    return computations, entry


def kernels(computations: dict, name: str) -> int:
    return sum(op not in FREE for op, _, _ in computations[name])


def anatomy(computations: dict, name: str) -> dict:
    """A loop body's own kernels, its nested loops' kernels per iteration (body and
    condition, their own nested loops not counted), and its conds' branches."""
    nested, conds = [], []
    for op, calls, trips in computations[name]:
        if op == "while":
            per = kernels(computations, calls["body"]) + kernels(computations, calls["condition"])
            inner = anatomy(computations, calls["body"])
            nested.append({"kernels": per, "trips": trips, "nested": inner["nested"]})
        elif op == "conditional":
            sizes = [total(computations, b) for b in calls["branches"]]
            conds.append(max(sizes))
    return {"kernels": kernels(computations, name), "nested": nested, "conds": conds}


def total(computations: dict, name: str) -> int:
    """Every kernel of a computation and of what it calls, each counted once."""
    count = kernels(computations, name)
    for _, calls, _ in computations[name]:
        for callee in [calls.get("body"), calls.get("condition"), *calls.get("branches", [])]:
            if callee:
                count += total(computations, callee)
    return count


def lanes_loop(computations: dict, entry: str) -> str:
    """The body of the entry's largest while loop (the lanes' loop)."""
    loops = [calls["body"] for op, calls, _ in computations[entry] if op == "while"]
    return max(loops, key=lambda body: total(computations, body))


def measure(case: str) -> dict:
    with tempfile.TemporaryDirectory() as dump:
        flags = f"--xla_dump_to={dump} --xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*_solve.*"
        env = {"XLA_FLAGS": flags, "JAX_ENABLE_COMPILATION_CACHE": "false", "PYTHONPATH": "."}
        command = [sys.executable, __file__, "--child", case]
        subprocess.run(command, env=env, check=True, capture_output=True)
        (path,) = pathlib.Path(dump).glob("*_solve*after_optimizations.txt")
        computations, entry = parse(path.read_text())
    body = lanes_loop(computations, entry)
    return {"case": case, "program": total(computations, entry), "loop": total(computations, body),
            **anatomy(computations, body)}  # fmt: skip


def describe(nested: list) -> str:
    parts = []
    for loop in nested:
        times = f"x{loop['trips']}" if loop["trips"] else "x trials"
        inner = f" (+ {describe(loop['nested'])} each)" if loop["nested"] else ""
        parts.append(f"{loop['kernels']} {times}{inner}")
    return ", ".join(parts) or "none"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child")
    parser.add_argument("--out", type=pathlib.Path)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    records = [measure(case) for case in CASES]
    lines = [
        "| case | kernels in the program | in the lanes loop | a trip's body | nested loops "
        "(kernels an iteration) | conds (largest branch) |",
        "|---|---:|---:|---:|---|---|",
    ]
    for r in records:
        lines.append(f"| {r['case']} | {r['program']} | {r['loop']} | {r['kernels']} | "
                     f"{describe(r['nested'])} | {', '.join(map(str, r['conds']))} |")  # fmt: skip
    print("\n".join(lines))
    if args.out:
        args.out.write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
