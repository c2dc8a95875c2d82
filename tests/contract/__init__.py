"""Tests of ``fixedopt/_contract/``: a solver of one's own run by the driver, and the
fixed carry of every solver's state."""
