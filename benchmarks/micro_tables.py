"""Markdown sections for the micro-benchmark records (``"micro"`` in a record)."""

from __future__ import annotations

from collections.abc import Sequence


def _of(records: Sequence[dict], kind: str) -> list[dict]:
    return [r for r in records if r.get("micro") == kind]


def _mark(ok: bool) -> str:
    return "✓" if ok else "✗"


def objective(records) -> list[str]:
    lines = [
        "| problem | B | n | unmasked (ms) | masked (fixedopt.fix, values array) "
        "| pinned to x | split (width) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in _of(records, "objective"):
        ok = r["masked_vs_unmasked"] <= r["target"]
        pinned = r.get("pinned_vs_unmasked")
        pinned = "—" if pinned is None else f"{pinned:.3f}x {_mark(pinned <= r['target'])}"
        lines.append(
            f"| {r['problem']} | {r['B']} | {r['n']} | {1e3 * r['unmasked_s']:.3f} "
            f"| {r['masked_vs_unmasked']:.3f}x {_mark(ok)} (≤{r['target']}x) | {pinned} "
            f"| {r['split_vs_unmasked']:.3f}x ({r['split_width']}) |"
        )
    return lines


def keep_fixed(records) -> list[str]:
    lines = [
        "| vector | reference step (ms) | reference GB/s | adam / reference "
        "| keep_fixed(adam) / reference | keep_fixed(adam) / adam | fixed exact |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in _of(records, "keep_fixed"):
        lines.append(
            f"| 2^{r['size'].bit_length() - 1} {r['dtype']} | {1e3 * r['reference_step_s']:.2f} "
            f"| {r['reference_GBps']:.1f} | {r['adam_vs_reference']:.2f}x "
            f"| {r['keep_fixed_vs_reference']:.2f}x | {r['keep_fixed_vs_adam']:.3f}x "
            f"| {'yes' if r['fixed_bit_identical'] else 'NO'} |"
        )
    return lines


def strategy(records) -> list[str]:
    lines = [
        "| B | n | mask pattern | split width | mask (s) | split (s) | split / mask "
        "| steps mean | split rel Δf vs mask |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in _of(records, "strategy"):
        lines.append(
            f"| {r['B']} | {r['n']} | {r['pattern']} | {r['split_width']} | {r['mask_s']:.3g} "
            f"| {r['split_s']:.3g} | {r['split_vs_mask']:.2f}x | {r['steps_mean']:.1f} "
            f"| {r['split_max_rel_obj_diff_vs_mask']:.1e} |"
        )
    return lines


def compiles(records) -> list[str]:
    lines = [
        "| check | B | n | change | jit cache growth | XLA compiles | expected new | ok |",
        "|---|---:|---:|---|---:|---:|---:|---|",
    ]
    for r in _of(records, "new_mask"):
        lines.append(
            f"| {r['call']} ({r['problem']}), mask strategy | {r['B']} | {r['n']} "
            f"| new mask | {r['cache_growth']} | {r['backend_compiles']} | 0 | {_mark(r['ok'])} |"
        )
    for r in _of(records, "split_compiles"):
        lines.append(
            f"| minimize (quad), split | {r['B']} | {r['n']} | {r['free_count']} free → "
            f"width {r['width']} | {r['cache_growth']} | {r['backend_compiles']} "
            f"| {r['expected_new']} | {_mark(r['ok'])} |"
        )
    return lines


def dispatch(records) -> list[str]:
    lines = [
        "| problem | B | n | public call (ms) | under the caller's jit (ms) |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in _of(records, "dispatch"):
        lines.append(
            f"| {r['problem']} | {r['B']} | {r['n']} | {1e3 * r['public_s']:.2f} "
            f"| {1e3 * r['jitted_s']:.2f} |"
        )
    return lines


def sections(records) -> list[list[str]]:
    """The micro-benchmark sections present in ``records``."""
    parts = [
        (
            "objective",
            "Masked objective + gradient vs unmasked and index splitting",
            "One batched `value_and_grad`, time relative to the unmasked objective. `masked`: "
            "`fixedopt.fix(fun, fixed, values)`, the form the solvers evaluate "
            "(`where(fixed, stop_gradient(values), x)`); `pinned to x`: "
            "`where(fixed, stop_gradient(x), x)`, equal values and gradients whenever the "
            "fixed entries of x hold their values, as the solvers' projection guarantees; "
            "`split`: free entries packed, scattered into the full vector in the objective.",
            objective,
        ),
        (
            "keep_fixed",
            "keep_fixed(optax.adam(1e-3)) vs optax.adam(1e-3), one step",
            "Buffers donated. Reference: one elementwise pass reading and writing the same "
            "buffers as Adam (p, mu, nu, g in; p, mu, nu out), the memory-bandwidth floor.",
            keep_fixed,
        ),
        (
            "strategy",
            'strategy="split" vs strategy="mask": whole solves (public calls)',
            "quad, LBFGS; split's time includes packing the indices from the concrete mask.",
            strategy,
        ),
        (
            "new_mask",
            "Compilations",
            "A new mask with the same shapes must not compile; "
            "under split a new free count compiles only for a new packed width.",
            compiles,
        ),
        ("dispatch", "Python overhead of the public call", "", dispatch),
    ]
    out = []
    for kind, title, text, table in parts:
        if _of(records, kind) or (kind == "new_mask" and _of(records, "split_compiles")):
            out.append(["", f"## {title}", "", *([text, ""] if text else [])])
            out.append(table(records))
    return out
