"""Floor 6: the public entry points. ``minimize``: ``minimize`` and ``least_squares``
(describe the call, run the driver); ``describe``: one call's keywords validated into the
driver's ``Plan`` and ``Inputs``;
``curve_fit``: ``curve_fit`` over ``least_squares`` and ``covariance`` (``fit_inputs``:
its data checked and shaped). Only the package
root (``fixedopt/__init__.py``, ``__main__``, ``testing``) stands above."""
