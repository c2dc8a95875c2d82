"""Fit a two-constant cost model of a lanes trip to the H200 measurements of issue 45.

A batch of ``B`` rows needing ``s`` steps on average (``s_max`` at most) runs through
``W`` lanes in about ``B s / W + (s_max - s)`` trips (the last rows admitted still need
their own steps), and a trip costs ``a + beta R W`` (a fixed part: launches, the loop's
predicate, the refill; and a part per lane: ``R`` bytes of lane state each). The time
``T(W) = trips(W) (a + beta R W)`` is linear in ``(a, beta)``: fitted by least squares of
the relative error. The width that minimizes it, with ``s = s_max - s`` (unknown before
the solve), is ``sqrt(B a / (beta R))``.

Run from the repository's root: ``python studies/2026-12-05-accelerator_widths/cost_model.py``.
"""

import json
import math
import pathlib

import numpy as np

HERE = pathlib.Path(__file__).parent
# Bytes of one row's lane state (inputs and loop state) at the default solver, as the
# lanes compute them at trace time (main at 50e8126, x64 on; captured once on the CPU).
ROW_BYTES = {"quad 16384x8 float64": 2065, "quad 16384x64 float64": 15561,
             "quad 16384x512 float64": 123529, "quad-straggler 65536x32 float64": 7849,
             "rosen 65536x64 float64": 14033, "quad 131072x64 float32": 15561,
             "gpufit 1e7": 378}  # fmt: skip
GPUFIT_STEPS = 3.34, 10  # mean iterations measured, the protocol's most


def width_at_765d82c(batch: int) -> int:
    """The default on a GPU when the measurements were made (an eighth of the batch)."""
    return min(batch, max(min(65536, -(-batch // 8)), 8))


def points() -> list[dict]:
    out = []
    for name in ("minimize.jsonl", "minimize-lanes.jsonl"):
        for line in (HERE / name).read_text().splitlines():
            r = json.loads(line)
            method = r.get("method", "")
            if r.get("kind") != "solve" or not (method == "fixedopt" or "lanes=" in method):
                continue
            batch = int(r["case"].split()[1].split("x")[0])
            width = int(method.split("=")[1]) if "=" in method else width_at_765d82c(batch)
            out.append({"case": r["case"], "B": batch, "W": width, "s": r["steps_mean"],
                        "s_max": r["steps_max"], "T": r["time"]})  # fmt: skip
    for line in (HERE / "widths.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["what"] == "fixedopt":
            steps, most = GPUFIT_STEPS
            out.append({"case": "gpufit 1e7", "B": 10**7, "W": r["lanes"] or 65536,
                        "s": steps, "s_max": most, "T": 1e7 / r["fits_s"]})  # fmt: skip
    return [p | {"R": ROW_BYTES[p["case"]]} for p in out]


def trips(p: dict, width: float) -> float:
    return p["B"] * p["s"] / width + (p["s_max"] - p["s"])


def main() -> None:
    data = points()
    rows = [[trips(p, p["W"]) / p["T"], trips(p, p["W"]) * p["R"] * p["W"] / p["T"]] for p in data]
    (a, beta), *_ = np.linalg.lstsq(np.array(rows), np.ones(len(data)), rcond=None)
    model = lambda p, w: trips(p, w) * (a + beta * p["R"] * w)
    print(f"a = {a * 1e3:.3f} ms a trip, beta = {beta * 1e12:.2f} ps a byte of lane state\n")
    print("| case | lanes | measured (ms) | model (ms) |\n|---|---:|---:|---:|")
    for p in data:
        print(f"| {p['case']} | {p['W']} | {p['T'] * 1e3:.1f} | {model(p, p['W']) * 1e3:.1f} |")
    print("\n| case | sqrt(B a / (beta R)) | best width tried | model there / at the best |")
    print("|---|---:|---:|---:|")
    for case in dict.fromkeys(p["case"] for p in data):
        tried = [p for p in data if p["case"] == case]
        best = min(tried, key=lambda p: p["T"])
        width = min(best["B"], int(math.sqrt(best["B"] * a / (beta * best["R"]))))
        ratio = model(best, width) / model(best, best["W"])
        print(f"| {case} | {width} | {best['W']} ({best['T'] * 1e3:.1f} ms) | {ratio:.2f} |")


if __name__ == "__main__":
    main()
