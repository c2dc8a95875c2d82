"""Floor 6: the public entry points. ``minimize``: ``minimize`` and ``least_squares``
(validate, batch, run the driver); ``options``: the validated options of one call;
``curve_fit``: ``curve_fit`` over ``least_squares`` and ``covariance``. Only the package
root (``fixedopt/__init__.py``, ``__main__``, ``testing``) stands above."""
