"""The persistent compilation cache: on by default in a folder of the user's, off with
``FIXEDOPT_CACHE=0``, and a cache the user configured left alone."""

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# A first compile before fixedopt's first solve: JAX decides at its first compile
# whether a cache is used, and fixedopt must make it decide again. (A least-squares
# solve: its program compiles in about half the time of minimize's.)
SOLVE = textwrap.dedent(
    """
    import jax, jax.numpy as jnp
    jax.jit(lambda x: x + 1)(1.0)
    import fixedopt
    residuals = lambda x: x - 2.0
    solution = fixedopt.least_squares(residuals, jnp.zeros(3), jnp.array([False, True, False]))
    print(jnp.round(solution.x, 3).tolist(), jax.config.jax_compilation_cache_dir,
          jax.config.jax_persistent_cache_min_compile_time_secs)
    """
)


def run(environment: dict, threshold: str | None = "0") -> str:
    """The solve's output in a new process of ``environment``, the user's threshold of
    the cache's compile time ``threshold`` (None: not set)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("FIXEDOPT_", "JAX_COMPILATION", "JAX_PERSISTENT"))}  # fmt: skip
    env |= {"PYTHONPATH": str(ROOT), **environment}
    if threshold is not None:
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = threshold
    done = subprocess.run([sys.executable, "-c", SOLVE], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def entries(folder: pathlib.Path) -> list[pathlib.Path]:
    return [path for path in folder.rglob("*") if path.is_file()] if folder.exists() else []


@pytest.mark.parametrize(("how", "threshold"), [("FIXEDOPT_CACHE", "0"), ("XDG_CACHE_HOME", None)])
def test_a_solve_writes_its_program_to_the_default_cache(tmp_path, how, threshold):
    """The folder, and the programs it keeps: those that compile for a tenth of a
    second or more (JAX writes only programs of >= 1 s by default: a fit's covariance,
    ~0.5 s, was compiled again in every process), unless the user set a threshold
    (here 0: kept). The solve compiles for longer than 0.1 s: written either way."""
    folder = tmp_path / "chosen"
    if how == "FIXEDOPT_CACHE":
        output = run({"FIXEDOPT_CACHE": str(folder)}, threshold)
    else:
        output = run({"XDG_CACHE_HOME": str(tmp_path / "xdg")}, threshold)
        folder = tmp_path / "xdg" / "fixedopt" / "jax"
    kept = "0.1" if threshold is None else f"{float(threshold)}"
    assert output == f"[2.0, 0.0, 2.0] {folder} {kept}", output
    assert entries(folder), "no program written to the cache"


def test_the_cache_can_be_turned_off_and_a_users_own_is_kept(tmp_path):
    output = run({"FIXEDOPT_CACHE": "0", "XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert output.endswith(" None 0.0") and not entries(tmp_path / "xdg")
    own = tmp_path / "own"
    output = run({"JAX_COMPILATION_CACHE_DIR": str(own), "FIXEDOPT_CACHE": str(tmp_path / "no")})
    assert output.endswith(f"{own} 0.0") and entries(own) and not entries(tmp_path / "no")


def test_the_library_digest_reads_every_source_file_of_fixedopt():
    """The digest a tail's mark holds equals one computed here, independently, from
    the package's ``.py`` files (their paths and bytes)."""
    import hashlib

    from fixedopt._numerics import stored

    root = ROOT / "fixedopt"
    sources = sorted(root.rglob("*.py"))
    assert len(sources) > 50 and root / "_driver" / "loop.py" in sources
    reference = hashlib.sha256()
    for source in sources:
        reference.update(source.relative_to(root).as_posix().encode() + b"\0")
        reference.update(source.read_bytes() + b"\0")
    assert stored.library_digest() == reference.hexdigest()


@pytest.mark.compiles_ahead
def test_a_changed_library_never_runs_a_tail_exported_by_another(tmp_path, monkeypatch):
    """The hazard: a tail's program that changed while its block's did not (a new
    fixedopt). Under the same library digest the new process runs the export of the
    mark (the old program: 2 x); under another digest it compiles its own (3 x); where
    fixedopt's source cannot be read (no digest), no mark is read or written."""
    import jax
    import jax.numpy as jnp

    from fixedopt._driver import ahead
    from fixedopt._numerics import stored
    from tests.helpers import persistent_cache

    def block():  # the block's program, the same in every "version"
        return jax.jit(lambda x: x + 1.0).lower(jnp.ones(3))

    def tail_of(factor):
        return jax.jit(lambda static, inputs: {"x": inputs["x"] * factor}, static_argnums=0)

    def new_process_runs(tail):
        ahead.forget()
        with ahead._lock:
            ahead._started.clear()
        ahead.register(tail, None)
        inputs = {"x": jnp.arange(3.0)}
        ahead.start(block, tail, "plan", inputs, export=True)
        return ahead.call(tail, "plan", inputs, like=inputs)["x"].tolist()

    with persistent_cache(tmp_path):
        monkeypatch.setattr(stored, "library_digest", lambda: "version one")
        assert new_process_runs(tail_of(2.0)) == [0.0, 2.0, 4.0]
        assert new_process_runs(tail_of(3.0)) == [0.0, 2.0, 4.0], "the mark's, by design"
        monkeypatch.setattr(stored, "library_digest", lambda: "version two")
        assert new_process_runs(tail_of(3.0)) == [0.0, 3.0, 6.0]
        assert len(list((tmp_path / "fixedopt-tails").iterdir())) == 2
        monkeypatch.setattr(stored, "library_digest", lambda: None)  # no source to read:
        assert new_process_runs(tail_of(4.0)) == [0.0, 4.0, 8.0]
        assert len(list((tmp_path / "fixedopt-tails").iterdir())) == 2, "no mark"
    ahead.forget()
