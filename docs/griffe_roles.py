"""A Griffe extension: Sphinx roles in fixedopt's docstrings become cross-references.

The docstrings name other objects as ``:func:`fixedopt.minimize``` or, inside the
package, ``:class:`Status```. Each role that names a public object (a name of
``fixedopt.__all__``, or an attribute of one) becomes an mkdocstrings cross-reference,
so the site links it; a role naming a private helper of the docstring's own module is
shown as code. Any other role (a typo, a removed name) stays a cross-reference to
``fixedopt.<target>``, which does not exist: the strict build fails on it.
"""

from __future__ import annotations

import importlib
import inspect
import re

import griffe

import fixedopt

ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|obj|exc):`(~?)([\w.]+)`")


def _lookup(root, path):
    for part in path:
        root = getattr(root, part, None)
    return root


def identifier(target: str, module: str) -> str | None:
    """The cross-reference of a role's target, or None to show it as code."""
    path = target.removeprefix("fixedopt.").split(".")
    found = _lookup(fixedopt, path)
    if path[0] in fixedopt.__all__ and found is not None:
        documented = len(path) == 1 or inspect.isfunction(found)
        return "fixedopt." + ".".join(path if documented else path[:-1])
    if not target.startswith("fixedopt.") and _lookup(importlib.import_module(module), path):
        return None  # a private helper of the same module
    return f"fixedopt.{'.'.join(path)}"  # no such object: strict build fails


class SphinxRoles(griffe.Extension):
    """Rewrite ``:role:`target``` in every docstring as a cross-reference (or code)."""

    def on_object(self, *, obj, **kwargs) -> None:
        if obj.docstring is None:
            return

        def replace(match: re.Match) -> str:
            short, target = match.groups()
            title = f"`{target.rsplit('.', 1)[-1] if short else target}`"
            reference = identifier(target, obj.module.path)
            return title if reference is None else f"[{title}][{reference}]"

        obj.docstring.value = ROLE.sub(replace, obj.docstring.value)
