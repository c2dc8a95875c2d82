"""Floor 2: the solver contract. ``solver``: what a solver receives (``Problem``,
``StepContext``) and returns (``Step``), and ``Solver``; ``status``: the codes
``Status``, ``Reason`` and ``Outcome`` (a leaf). Imports ``_inputs``, ``_fixing`` and
``_derivatives``."""
