"""One file per solver; each supplies ``init`` and ``step`` for the shared loop."""
