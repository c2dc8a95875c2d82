"""Tests of ``fixedopt/_entry/``: ``minimize``, ``least_squares`` and ``curve_fit`` as a
user calls them, against references, with the guarantees of DESIGN.md."""
