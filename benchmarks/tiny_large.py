"""The tiny_large suite: the Gpufit protocol at 1e7 fits (quick: 1e4) on the default
path, once: fits/s, accuracy, and the process's peak memory (the lanes bound the loop's
working memory; the data and results are O(B))."""

from __future__ import annotations

import resource

from benchmarks.tiny import GPUFIT, LANES, fit_records
from benchmarks.tiny_problems import MODELS


def run(quick: bool, args=None) -> list[dict]:
    fits = MODELS["gaussian"][2](10**4 if quick else 10**7)
    records, _ = fit_records(fits, GPUFIT | LANES, 1, "gpufit")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    return [r | {"process_peak_rss_bytes": peak} for r in records]
