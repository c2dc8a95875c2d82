"""Tests of ``fixedopt/_objective/``: index splitting, vectorized objectives, robust
losses and the Poisson likelihood."""
