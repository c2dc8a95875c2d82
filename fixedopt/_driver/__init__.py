"""Floor 5: the compiled solve. ``engine``: each row set up once, the loop, the way
back to the user's tree with the derivative rule; ``loop``: the one driver (failure
policy, convergence tests, statuses); ``lanes``: a batch through lanes that refill as
rows stop (``lane_checks``: their certification); ``machine``: how a solve runs on
its backend (one ``Schedule``: lanes, blocks, precision, reductions, options); ``batching``:
a batch in compiled sizes (CPU blocks, their tails); ``packing``: per-row scalars held
as one array per dtype; ``compiler`` and ``cache``: XLA's options and the persistent
compilation cache; ``progress``: the host-side reporters and their call in the loop.
Imports every floor below, never a solver."""
