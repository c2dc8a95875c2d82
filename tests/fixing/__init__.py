"""Tests of ``fixedopt/_fixing/``: the mask operations, ``keep_fixed``, Flax masks, and
the fixed mask fused into the compiled passes."""
