"""Reproducible text: docstrings of Python's standard library.

Text that exists on every machine and was not written by this project. The list of
modules is fixed, so for a given Python version the texts are fixed (the docstrings can
change between Python versions: captures record ``sys.version``).
"""

from __future__ import annotations

import importlib
import inspect

# Standard-library modules whose docstrings are at least ~1200 characters (about 300
# tokens for the SmolLM2 tokenizer in Python 3.11), longest first.
STDLIB_SOURCES: tuple[str, ...] = (
    "pdb", "configparser", "re", "statistics", "sys", "wave", "json", "argparse",
    "http.client", "csv", "cmd", "hashlib", "socket", "timeit", "unittest", "copy", "uuid",
    "io", "heapq", "inspect", "urllib.parse", "struct", "itertools",
    "xml.etree.ElementTree", "sched", "doctest",
)


def stdlib_texts(names=None) -> list[str]:
    """Docstrings (``inspect.getdoc``) of standard-library modules, in the given order.

    Parameters
    ----------
    names : sequence of str, optional
        Importable module names (default :data:`STDLIB_SOURCES`).

    Returns
    -------
    list of str
        One cleaned docstring per name.

    Raises
    ------
    ValueError
        A name cannot be imported or has no docstring.

    Examples
    --------
    >>> from kvstats.models.texts import stdlib_texts
    >>> texts = stdlib_texts(["json", "re"])
    >>> len(texts), texts[0].startswith("JSON")
    (2, True)
    """
    names = STDLIB_SOURCES if names is None else names
    if isinstance(names, str):
        raise TypeError(f"names must be a sequence of module names, not a single string; received {names!r}")
    out = []
    for name in names:
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            raise ValueError(f"names must be importable standard-library modules; "
                             f"cannot import {name!r}: {exc}") from exc
        doc = inspect.getdoc(module)
        if not doc:
            raise ValueError(f"names must be modules with a docstring; {name!r} has none")
        out.append(doc)
    return out
