"""Tests of ``fixedopt/_driver/``: lanes, packing, progress, the stopping rules and
statuses, sharded batches, and the lowered program on every platform."""
