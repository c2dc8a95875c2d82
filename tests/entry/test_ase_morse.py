"""The JAX Morse potential of notebook 05 matches ASE's ``MorsePotential`` to rounding.

The potential is the notebook's own code (its cell tagged ``morse-potential``), so the
notebook's relaxations use exactly what is checked here. The reference is ASE's
calculator (NumPy, its own neighbor list and analytic forces), on structures unlike the
notebook's: an fcc(100) slab, a periodic bulk cell (images in all three directions), a
small cell whose cutoff spans several images, atoms shaken so that pair distances fall
inside the smoothing region, and non-default parameters.
"""

import pathlib

import jax
import jax.numpy as jnp
import nbformat
import numpy as np
import pytest
from ase.build import bulk, fcc100, fcc111
from ase.calculators.morse import MorsePotential

NOTEBOOK = (
    pathlib.Path(__file__).resolve().parents[2] / "notebooks" / "05_ase_slab_relaxation.ipynb"
)


@pytest.fixture(scope="module")
def potential():
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    (source,) = [c.source for c in cells if "morse-potential" in c.metadata.get("tags", [])]
    namespace = {"jnp": jnp, "np": np}
    exec(compile(source, f"{NOTEBOOK.name}[morse-potential]", "exec"), namespace)
    namespace["energy_and_gradient"] = jax.jit(jax.value_and_grad(namespace["morse_energy"]))
    return namespace


STRUCTURES = {
    "fcc100 slab": lambda: fcc100("Cu", size=(2, 2, 3), vacuum=6.0),
    "fcc111 3x3 slab": lambda: fcc111("Pt", size=(3, 3, 2), vacuum=5.0),
    "bulk, periodic in 3D": lambda: bulk("Ni", "fcc", a=3.52, cubic=True),
    "primitive bulk cell": lambda: bulk("Al", "fcc", a=4.05),
}
PARAMETERS = [(1.0, 2.5, 6.0), (0.35, 2.9, 3.9)]  # (epsilon, r0, rho0)


@pytest.mark.parametrize("name", STRUCTURES)
@pytest.mark.parametrize("epsilon, r0, rho0", PARAMETERS)
def test_energy_and_forces_match_ase(potential, name, epsilon, r0, rho0):
    atoms = STRUCTURES[name]()
    rng = np.random.default_rng(len(atoms))
    atoms.positions += 0.15 * rng.normal(size=atoms.positions.shape)
    atoms.calc = MorsePotential(epsilon=epsilon, r0=r0, rho0=rho0)
    shifts = jnp.asarray(potential["image_shifts"]([atoms], 2.7 * r0))
    energy, gradient = potential["energy_and_gradient"](
        jnp.asarray(atoms.positions),
        jnp.asarray(atoms.cell.array),
        jnp.ones(len(atoms), bool),
        jnp.array([epsilon, r0, rho0]),
        shifts,
    )
    assert abs(float(energy) - atoms.get_potential_energy()) < 1e-10
    np.testing.assert_allclose(-np.asarray(gradient), atoms.get_forces(), rtol=0, atol=1e-10)


def test_padding_atoms_change_nothing(potential):
    atoms = fcc111("Cu", size=(2, 2, 2), vacuum=5.0)
    atoms.calc = MorsePotential(epsilon=0.34, r0=2.87, rho0=3.9)
    shifts = jnp.asarray(potential["image_shifts"]([atoms], 2.7 * 2.87))
    padded = np.concatenate([atoms.positions, [[0.0, 0.0, 1000.0], [0.0, 0.0, 1000.0]]])
    real = np.arange(len(padded)) < len(atoms)
    energy, gradient = potential["energy_and_gradient"](
        jnp.asarray(padded),
        jnp.asarray(atoms.cell.array),
        jnp.asarray(real),
        jnp.array([0.34, 2.87, 3.9]),
        shifts,
    )
    assert abs(float(energy) - atoms.get_potential_energy()) < 1e-10
    assert np.all(np.isfinite(gradient))  # two padding atoms on one spot: no NaN
    np.testing.assert_array_equal(gradient[~real], 0.0)
    np.testing.assert_allclose(-np.asarray(gradient[real]), atoms.get_forces(), atol=1e-10)
