"""Tests of ``fixedopt/_inputs/`` (and the argument checks above it): bad input is a
clear error naming it."""
