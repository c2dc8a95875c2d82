"""Floor 0, the ground: the rules every argument meets. ``checks``: scalars (counts,
numbers, flags, choices); ``validate``: the trees (parameters, masks, fixed values,
bounds) normalized into one canonical form. Imports nothing of fixedopt."""
