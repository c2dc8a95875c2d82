"""Whether this jaxlib takes XLA:CPU's options (``cpu_compiler.accepted``): probed by a
tiny program once per cache folder, a new process then reading the mark, not the
probe's trace, lowering and compile (issue 62 item 4)."""

import jax
import pytest

from fixedopt._numerics import cpu_compiler, stored

OWN = (("xla_cpu_use_fusion_emitters", False),)


@pytest.fixture
def probes(tmp_path, monkeypatch):
    """The probes traced (each ``jax.jit`` the module makes), in a cache folder of the
    test's own, no answer of this process remembered before or after."""
    monkeypatch.setattr(stored, "cache_subfolder", lambda name: tmp_path / name)
    made = []

    def counted(fun, **options):
        made.append(options)
        return real_jit(fun, **options)

    real_jit = jax.jit
    monkeypatch.setattr(cpu_compiler.jax, "jit", counted)
    cpu_compiler._accepted.cache_clear()
    yield made
    cpu_compiler._accepted.cache_clear()


def _marks(tmp_path):
    folder = tmp_path / cpu_compiler.PROBES
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="XLA:CPU's options")
def test_an_accepted_probe_is_read_in_a_new_process(probes, tmp_path):
    assert cpu_compiler._accepted(OWN)
    assert len(probes) == 1 and len(_marks(tmp_path)) == 1
    cpu_compiler._accepted.cache_clear()  # a new process
    assert cpu_compiler._accepted(OWN)
    assert len(probes) == 1  # not probed again
    other = (("xla_cpu_use_fusion_emitters", True),)
    assert cpu_compiler._accepted(other)  # other options: a mark of their own
    assert len(probes) == 2 and len(_marks(tmp_path)) == 2


def test_a_refused_option_leaves_no_mark(probes, tmp_path):
    refused = (("xla_fixedopt_no_such_option", True),)
    assert not cpu_compiler._accepted(refused)
    cpu_compiler._accepted.cache_clear()
    assert not cpu_compiler._accepted(refused)
    assert len(probes) == 2 and _marks(tmp_path) == []


def test_without_a_cache_folder_each_process_probes(probes, monkeypatch, tmp_path):
    monkeypatch.setattr(stored, "cache_subfolder", lambda name: None)
    assert cpu_compiler._accepted(OWN) == cpu_compiler.accepted()
    cpu_compiler._accepted.cache_clear()
    cpu_compiler._accepted(OWN)
    assert len(probes) >= 2 and _marks(tmp_path) == []
