"""Tests of ``fixedopt/_solvers/``: the line searches, the two-loop recursion, the
small unrolled solves, the Gauss–Newton step, and exact fixed entries for every solver."""
