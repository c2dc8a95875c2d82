"""Floor 3: one file per solver, each supplying ``init`` and ``step`` for the shared
loop, and what they share: the line searches (``linesearch``: projected backtracking;
``wolfe``: Hager–Zhang), L-BFGS's initial scaling (``scaling``) and small unrolled
solves (``small_linalg``). Imports the floors below the contract and the contract."""
