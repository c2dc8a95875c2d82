"""Floor 3: from the user's function to the ``Problem`` a solver sees. ``arguments``:
``fun``, ``args``, ``args_axes`` and ``solver`` checked and batched; ``call_note``: how
the function is called and the note on an error inside it; ``fit_data``: ``sigma`` and
Poisson counts; ``losses``: robust losses; ``problem``: a row's flat data and its masked
objective; ``reparam``: index splitting; ``vectorized``: objectives written for the
whole batch. Imports floors 0–2, never ``_solvers``."""
