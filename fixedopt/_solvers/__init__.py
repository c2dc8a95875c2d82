"""Floor 3: one file per solver, each supplying ``init`` and ``step`` for the shared
loop, and what they share: the line searches (``linesearch``: projected backtracking;
``wolfe``: Hager–Zhang), L-BFGS's memory of curvature pairs and two-loop recursion
(``lbfgs_memory``), L-BFGS's initial scaling (``scaling``), small unrolled
solves (``small_linalg``) and the least-squares solvers' normal equations on the free
block (``normal_equations``). Imports the floors below the contract and the contract."""
