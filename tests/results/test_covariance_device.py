"""The covariance's device path (a TPU's machine profile: ``Backend.device_qr_covariance``,
``machine.covariance_on_device``), run here on the CPU as if it were the device: every
row by the elementwise QR in one call, whatever the block's height, and the rows it does
not certify by LAPACK's path on the host's CPU, each row's result its own; taken by
``fixedopt.covariance``, ``curve_fit`` and ``Model.fit`` alike, one fit too; their
program compiled in fixedopt's thread beside the solve where the profile says so."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt._driver import ahead
from fixedopt._numerics import backends
from fixedopt._results import covariance as covariance_module
from fixedopt._results import covariance_batches
from fixedopt.models import GaussianModel
from fixedopt.testing import no_compiles_ahead
from tests.helpers import compiling_threads, persistent_cache

# The CPU taken for a device: on an accelerator, tests/test_device.py compares the two.
pytestmark = pytest.mark.skipif(jax.default_backend() != "cpu", reason="the CPU as a device")
POINTS = 1000  # m n^2 = 9000 > small_inverse.MOST_WORK: the CPU takes LAPACK's path
T = np.linspace(0.0, 1.0, POINTS, dtype=np.float32)
# The CPU's own covariance, in one call as the device's (not in chunks).
UNCHUNKED = backends.CPU._replace(chunked=False)


def two_slopes(p, y):
    """A line whose slope is ``p[0] + p[1]``: collinear where both are free."""
    return (p[0] + p[1]) * T + p[2] - y


@pytest.fixture
def as_device(monkeypatch):
    """The CPU taken for a device whose profile takes the device path (a TPU's: no
    chunks); yields the ``(rows, paths)`` sent on to the host, and ``"one"`` for each
    fit computed alone on the device path."""
    tpu_like = backends.CPU._replace(device_qr_covariance=True, chunked=False)
    monkeypatch.setitem(backends.BACKENDS, "cpu", tpu_like)  # the profile, read at the call
    sent = []
    on_host, one_on_device = covariance_batches.on_host, covariance_batches.one_on_device

    def counted(run, leaves, flags, batch, paths, size):
        sent.append((batch, paths))
        return on_host(run, leaves, flags, batch, paths, size)

    def one_counted(run, leaves):
        sent.append("one")
        return one_on_device(run, leaves)

    monkeypatch.setattr(covariance_batches, "on_host", counted)
    monkeypatch.setattr(covariance_batches, "one_on_device", one_counted)
    return sent


def rows():
    rng = np.random.default_rng(5)
    x = rng.uniform(0.5, 2.0, (12, 3)).astype(np.float32)
    y = (x[:, :1] * T + x[:, 2:] + rng.normal(0, 0.05, (12, POINTS))).astype(np.float32)
    fixed = np.zeros((12, 3), bool)
    fixed[::2, 1] = True  # even rows: one slope; odd rows: two, collinear
    return x, fixed, y


def errors(x, fixed, y):
    found = fixedopt.covariance(jnp.asarray(x), two_slopes, jnp.asarray(fixed),
                                args=(jnp.asarray(y),), batched=True)  # fmt: skip
    return np.asarray(found.covariance), np.asarray(found.rank_deficient)


def assert_close(device, cpu, deficient):
    """The rank-deficient rows bit for bit (both LAPACK's on the CPU), the others to
    1e-5 of ``sqrt(var_i var_j)``: two float32 inverses of the same J (cond ~ 10)."""
    np.testing.assert_array_equal(device[deficient], cpu[deficient])
    if np.all(deficient):
        return
    full, scale = cpu[~deficient], np.sqrt(np.einsum("bii->bi", cpu[~deficient]))
    scale = np.where(scale > 0, scale, 1.0)
    error = np.abs(device[~deficient] - full) / (scale[:, :, None] * scale[:, None, :])
    assert np.max(error) <= 1e-5


def test_the_device_path_matches_the_cpus_and_sends_on_only_uncertified_rows(
    as_device, monkeypatch
):
    x, fixed, y = rows()
    device, deficient = errors(x, fixed, y)
    assert as_device == [(6, ("exact",))]  # the six collinear rows, LAPACK's on the host
    as_device.clear()
    monkeypatch.setitem(backends.BACKENDS, "cpu", UNCHUNKED)  # the CPU's own path: LAPACK's
    cpu, cpu_deficient = errors(x, fixed, y)
    assert as_device == []
    np.testing.assert_array_equal(deficient, ~fixed[:, 1])
    np.testing.assert_array_equal(deficient, cpu_deficient)
    assert_close(device, cpu, deficient)


def test_one_fit_takes_the_device_path_too(as_device, monkeypatch):
    """A fit alone (not batched): the QR on the device, LAPACK's on the host's CPU for a
    row it does not certify (the second, collinear), as a row of a batch."""
    x, fixed, y = rows()

    def alone(row):
        found = fixedopt.covariance(jnp.asarray(x[row]), two_slopes, jnp.asarray(fixed[row]),
                                    args=(jnp.asarray(y[row]),))  # fmt: skip
        return np.asarray(found.covariance)[None], np.asarray(found.rank_deficient)[None]

    device = [alone(row) for row in (0, 1)]
    assert as_device == ["one", "one"]
    monkeypatch.setitem(backends.BACKENDS, "cpu", UNCHUNKED)
    cpu = [alone(row) for row in (0, 1)]
    for (found, deficient), (expected, cpu_deficient), row in zip(device, cpu, (0, 1)):
        assert deficient[0] == cpu_deficient[0] == (row == 1)
        assert_close(found, expected, deficient)


def line(t, a, b):
    return a * t + b


@pytest.mark.compiles_ahead
def test_curve_fit_takes_the_profiles_path_compiled_beside_its_solve(as_device, monkeypatch,
                                                                     tmp_path):  # fmt: skip
    """``curve_fit`` asks the machine profile as ``fixedopt.covariance`` does
    (``machine.covariance_on_device``): its rows by the QR on the "device". Where the
    profile says so (``Backend.covariance_ahead``: a TPU's) that program is lowered once
    the arguments are checked and compiled in fixedopt's thread while the solve
    compiles: the call's thread compiles none, and ``pcov`` is bit for bit the one the
    call compiles itself, after its solve (nothing ahead); the CPU's own profile has
    none ahead (``tests/driver/test_schedule.py``). Persistent caches of their own (the
    suite's may hold the program); one solve program."""
    monkeypatch.setitem(backends.BACKENDS, "cpu", _ahead_profile())
    calls, real = [], covariance_batches.on_device
    monkeypatch.setattr(covariance_batches, "on_device", lambda *a: calls.append(1) or real(*a))
    x, _, y = rows()

    def fit():
        return fixedopt.curve_fit(line, T, y[:4], p0=x[:4, ::2], batched=True)[1]

    pcov, alone = _ahead_and_alone(fit, tmp_path)
    assert calls == [1, 1] and as_device == []  # every row certified: none sent to the host
    np.testing.assert_array_equal(np.asarray(pcov), np.asarray(alone))


@pytest.mark.compiles_ahead
@pytest.mark.fewer_optimizations  # one program compiled twice: its bits equal at any level
def test_model_fit_compiles_its_covariance_beside_its_solve(as_device, monkeypatch, tmp_path):
    """``Model.fit`` as ``curve_fit``: where the profile says so its covariance's program,
    with the derived parameters (each Gaussian's ``fwhm`` and ``height``), is compiled in
    fixedopt's thread beside the solve, here a block too large for the device path (9
    parameters: LAPACK's, the whole batch in one call), and the propagated covariance is
    bit for bit the one of the program the call compiles itself."""
    monkeypatch.setitem(backends.BACKENDS, "cpu", _ahead_profile())
    rng = np.random.default_rng(7)
    centres = np.array([0.2, 0.5, 0.8]) + rng.uniform(-0.02, 0.02, (4, 3))
    peaks = np.exp(-0.5 * ((T[None, None] - centres[:, :, None]) / 0.05) ** 2).sum(axis=1)
    y = (peaks + rng.normal(0, 0.02, (4, POINTS))).astype(np.float32)
    model = GaussianModel(prefix="a_") + GaussianModel(prefix="b_") + GaussianModel(prefix="c_")
    params = model.make_params()
    for prefix, centre in zip("abc", (0.2, 0.5, 0.8)):
        params[f"{prefix}_amplitude"].set(value=0.12)
        params[f"{prefix}_center"].set(value=centre)
        params[f"{prefix}_sigma"].set(value=0.05)

    def fit():
        return model.fit(y, params, x=T).covariance

    covariance, alone = _ahead_and_alone(fit, tmp_path)
    assert as_device == [] and covariance.shape == (4, 15, 15)
    assert np.all(np.isfinite(covariance))
    np.testing.assert_array_equal(covariance, alone)


def _ahead_profile():
    """The profile of ``as_device`` that compiles the covariance ahead (a TPU's)."""
    return backends.BACKENDS["cpu"]._replace(covariance_ahead=True)


def _ahead_and_alone(fit, folder):
    """``fit()`` with its covariance compiled ahead (checked: in fixedopt's thread),
    then with nothing ahead (checked: in the caller's), each its covariance program
    compiled anew, in persistent caches of their own (the suite's may hold it)."""

    def fresh(where):
        covariance_module._compiled.plain.clear_cache()  # compiled anew, in this call
        covariance_module._compiled.tuned.clear_cache()
        with ahead._lock:
            for key in [k for k in ahead._started if k[0] == "covariance-on-device"]:
                del ahead._started[key]
        with persistent_cache(folder / where):
            return fit()

    found, threads = compiling_threads(lambda: fresh("ahead"), "jit(_row_covariances)")
    assert threads and all(name.startswith("fixedopt-ahead") for name in threads), threads
    with no_compiles_ahead():
        alone, threads = compiling_threads(lambda: fresh("here"), "jit(_row_covariances)")
    assert threads == ["MainThread"], threads
    return found, alone
