"""Tests of ``fixedopt/_derivatives/``: implicit and unrolled derivatives of a solve,
and the ring buffer the two modes read."""
