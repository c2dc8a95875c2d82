"""The covariance's device path (a TPU's machine profile: ``Backend.device_qr_covariance``),
run here on the CPU as if it were the device: every row by the elementwise QR in one
call, whatever the block's height, and the rows it does not certify by LAPACK's path
on the host's CPU, each row's result its own."""

import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt._numerics import buckets
from fixedopt._results import covariance

POINTS = 1000  # m n^2 = 9000 > small_inverse.MOST_WORK: the CPU takes LAPACK's path
T = np.linspace(0.0, 1.0, POINTS, dtype=np.float32)


def two_slopes(p, y):
    """A line whose slope is ``p[0] + p[1]``: collinear where both are free."""
    return (p[0] + p[1]) * T + p[2] - y


@pytest.fixture
def as_device(monkeypatch):
    """The CPU taken for a device of :data:`covariance.DEVICE_QR` (no chunks); yields
    the ``(rows, paths)`` sent on to the host."""
    monkeypatch.setattr(covariance, "DEVICE_QR", {"cpu"})
    monkeypatch.setattr(buckets, "chunks_here", lambda leaves: False)
    sent = []
    on_host = covariance._on_host

    def counted(run, leaves, flags, batch, paths, size):
        sent.append((batch, paths))
        return on_host(run, leaves, flags, batch, paths, size)

    monkeypatch.setattr(covariance, "_on_host", counted)
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


def test_the_device_path_matches_the_cpus_and_sends_on_only_uncertified_rows(as_device):
    x, fixed, y = rows()
    device, deficient = errors(x, fixed, y)
    assert as_device == [(6, ("exact",))]  # the six collinear rows, LAPACK's on the host
    as_device.clear()
    covariance.DEVICE_QR.clear()  # the CPU's own path: LAPACK's for this tall block
    cpu, cpu_deficient = errors(x, fixed, y)
    np.testing.assert_array_equal(deficient, ~fixed[:, 1])
    np.testing.assert_array_equal(deficient, cpu_deficient)
    np.testing.assert_array_equal(device[deficient], cpu[deficient])
    full, scale = cpu[~deficient], np.sqrt(np.einsum("bii->bi", cpu[~deficient]))
    scale = np.where(scale > 0, scale, 1.0)
    error = np.abs(device[~deficient] - full) / (scale[:, :, None] * scale[:, None, :])
    assert np.max(error) <= 1e-5  # two float32 inverses of the same J (cond ~ 10)
