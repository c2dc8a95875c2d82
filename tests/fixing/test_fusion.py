"""The fixed mask fuses into the passes the plain program makes anyway.

Compiled-HLO structure, so it cannot regress silently: the masked Adam step and the
masked objective have as many array-sized fusions (passes over memory) as the plain
ones and store no other array: no mask widened to a float, no second masking pass.
"""

import jax
import pytest

from benchmarks.fusion import adam_steps, materialized, objective_steps

SIZE = 1 << 12


@pytest.mark.parametrize("cases", [adam_steps, objective_steps], ids=["adam", "objective"])
def test_masked_program_makes_no_extra_pass(cases):
    programs, donate = cases(SIZE)
    hlo = {
        name: jax.jit(fun, donate_argnums=donate).lower(*make()).compile().as_text()
        for name, (fun, make) in programs.items()
    }
    written = {name: materialized(text, SIZE) for name, text in hlo.items()}
    assert written["plain"], "the parser found no array-sized result"
    assert all(kind.endswith(":fusion") for kind in written["masked"]), written
    assert written["masked"] == written["plain"], written
