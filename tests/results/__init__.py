"""Tests of ``fixedopt/_results/``: ``Solution``, ``report``, records, and the two
covariances."""
