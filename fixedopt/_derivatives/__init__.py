"""Floor 1: how a solve is differentiated. ``differentiation``: ``Implicit()`` and
``Unroll()``, which supply the loop primitive, the ring-buffer slots and the derivative
rule; ``implicit``: the implicit function theorem on the free block; ``ring``: one slot
of a ring buffer shared by a batch, in the two forms the modes pick from. Imports only
``_inputs``."""
