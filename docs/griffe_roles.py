"""A Griffe extension: fixedopt's docstrings as the site renders them.

Doctest examples (``>>>`` lines and their output) become fenced ``pycon`` code blocks
wherever they stand: Google style parses an ``Examples:`` section as code, but an
``Example:`` section is an admonition whose text is Markdown, where ``>>>`` is a nested
blockquote and the lines run together. ``docs/hooks.py`` fails the strict build on any
``>>>`` left outside a code block.

Sphinx roles in the docstrings become cross-references.

The docstrings name other objects as ``:func:`fixedopt.minimize``` or, inside the
package, ``:class:`Status```. Each role that names a public object (a name of
``fixedopt.__all__``, or an attribute of one) becomes an mkdocstrings cross-reference,
so the site links it; a role naming a private helper of the docstring's own module, or
an existing private module or object (``fixedopt._derivatives.implicit``), is shown as
code. Any other role (a typo, a removed name) stays a cross-reference to
``fixedopt.<target>``, which does not exist: the strict build fails on it.
"""

from __future__ import annotations

import importlib
import inspect
import re

import griffe

import fixedopt

ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|obj|exc):`(~?)([\w.]+)`")
PROMPT = re.compile(r"^(\s*)>>>( |$)")


def fence_doctests(text: str) -> str:
    """``text`` with each doctest (its prompt lines, continuation lines and output, up to
    a blank line or a dedent) in a fenced ``pycon`` block at its own indentation; a
    doctest already inside a fence is left as it is."""
    out, block, indent, fenced = [], [], "", False
    for line in [*text.split("\n"), None]:
        if block and (line is None or not line.strip() or not line.startswith(indent)):
            out += [f"{indent}```pycon", *block, f"{indent}```"]
            block = []
        if line is None:
            break
        match = PROMPT.match(line)
        if block:
            block.append(line)
        elif match and not fenced:
            indent, block = match.group(1), [line]
        else:
            fenced ^= line.strip().startswith("```")
            out.append(line)
    return "\n".join(out)


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
    if target.startswith("fixedopt._") and _exists(target):
        return None  # a private module or object: named, not documented
    return f"fixedopt.{'.'.join(path)}"  # no such object: strict build fails


def _exists(dotted: str) -> bool:
    """Whether ``dotted`` names a module, or an attribute path below one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        return _lookup(found, parts[cut:]) is not None
    return False


class SphinxRoles(griffe.Extension):
    """Rewrite ``:role:`target``` in every docstring as a cross-reference (or code), and
    fence its doctests."""

    def on_object(self, *, obj, **kwargs) -> None:
        if obj.docstring is None:
            return

        def replace(match: re.Match) -> str:
            short, target = match.groups()
            title = f"`{target.rsplit('.', 1)[-1] if short else target}`"
            reference = identifier(target, obj.module.path)
            return title if reference is None else f"[{title}][{reference}]"

        obj.docstring.value = fence_doctests(ROLE.sub(replace, obj.docstring.value))
