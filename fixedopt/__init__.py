"""fixedopt: batched optimization in JAX where each row has its own fixed components.

The public surface; every name is defined in a private module and re-exported here.
"""

from fixedopt._mask import fix as fix
from fixedopt._mask import project as project
from fixedopt._optax import KeepFixedState as KeepFixedState
from fixedopt._optax import keep_fixed as keep_fixed

__version__ = "0.1.0"

__all__ = ["KeepFixedState", "fix", "keep_fixed", "project"]
