"""Reproducible text: docstrings of Python's standard library.

Text that exists on every machine and was not written by this project. The list of
modules is fixed, so for a given Python version the texts are fixed (the docstrings can
change between Python versions: captures record ``sys.version``).
"""

from __future__ import annotations

import importlib
import inspect

from kvstats._checks import check_int

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
    if isinstance(names, (str, bytes)):
        raise TypeError(f"names must be a sequence of module names, not a single string; received {names!r}")
    # (an int was Python's "not iterable", an item that is not a str a ValueError of importlib's)
    names = list(names) if hasattr(names, "__iter__") else names
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"names must be a sequence of module names (str); received {names!r:.80}")
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


def prompt_token_ids(tokenizer, n_tokens: int, names=None) -> list[int]:
    """The first ``n_tokens`` token ids of the standard-library texts, tokenized one by one.

    The benchmarks' prompt: each text of :func:`stdlib_texts` is tokenized on its own
    (``tokenizer(text)["input_ids"]``, so each keeps the tokenizer's special tokens) and
    the ids are concatenated until ``n_tokens`` are reached.

    Parameters
    ----------
    tokenizer : callable
        A transformers tokenizer (``tokenizer(text)["input_ids"]`` is a list of ints).
    n_tokens : int
        Prompt length, at least 1.
    names : sequence of str, optional
        Modules whose docstrings are used (default :data:`STDLIB_SOURCES`).

    Returns
    -------
    list of int
        Exactly ``n_tokens`` ids.

    Raises
    ------
    ValueError
        ``n_tokens`` below 1, or more tokens asked than the texts hold.

    Examples
    --------
    >>> words = lambda text: {"input_ids": [len(w) for w in text.split()]}  # a stand-in tokenizer
    >>> ids = prompt_token_ids(words, 5, ["json"])
    >>> len(ids), ids == words(stdlib_texts(["json"])[0])["input_ids"][:5]
    (5, True)
    """
    n = check_int(n_tokens, "n_tokens", low=1)
    ids: list[int] = []
    for text in stdlib_texts(names):
        ids += tokenizer(text)["input_ids"]
        if len(ids) >= n:
            return ids[:n]
    raise ValueError(f"n_tokens must be at most {len(ids)} (all the texts' tokens); received {n}")
