"""Floor 1: the fixed-mask idea. ``mask``: select fixed entries, ``fix``, ``project``
and the one definition of the entries a bound holds (``active_set``); ``keep_fixed``:
the exact freeze for any optax optimizer; ``flax_mask``: ``mask_from``, a mask from
Flax's filters. Imports only ``_inputs``."""
