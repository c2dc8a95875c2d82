"""Floor 4: what a solve returns and what is read from it. ``solution``: ``Solution``;
``report``: ``report``; ``records``: ``to_records`` and ``to_dataframe``;
``covariance`` and ``hessian_covariance``: uncertainties on the free block
(``free_block``: the entries a fit holds, the free block's linear algebra). Imports
floors 0–3 (``_objective`` for the function's arguments), never the driver."""
