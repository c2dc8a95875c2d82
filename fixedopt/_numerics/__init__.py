"""Floor 0, beside ``_inputs``: arithmetic every floor shares. ``reduce``: sums, dot
products, extremes and tests along a vector's last axis that compile to one kernel.
Imports nothing of fixedopt."""
