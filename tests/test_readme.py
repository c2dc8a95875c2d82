"""The README is a front door: small, its Python examples run as written, and it says
what a newcomer needs first (the two commands, the float64 switch)."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MOST_BYTES = 15_000  # the reference lives on the docs' topic pages (docs/)


def test_readme_python_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 3, "the README shows keep_fixed, minimize and curve_fit"
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})


def test_readme_is_a_front_door():
    text = README.read_text()
    assert len(text.encode()) <= MOST_BYTES, len(text.encode())
    for needed in ("make demo", "make test", 'jax.config.update("jax_enable_x64", True)',
                   "keep_fixed", "batched=True", "curve_fit", "CONVERGED"):  # fmt: skip
        assert needed in text, needed


def test_readme_links_point_at_files_that_exist():
    text = README.read_text()
    targets = re.findall(r"\]\(((?!https?:)[^)#]+)", text)
    assert targets
    missing = [target for target in targets if not (ROOT / target).exists()]
    assert not missing, missing
