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


def check_context(lengths, context: int | None, name: str, fix: str) -> None:
    """Refuse token streams that need more positions than the model's context.

    The one check of capture (:func:`kvstats.models.tokenize_texts`), ``kl_quality`` and
    ``run_retrieval``: beyond ``max_position_embeddings`` RoPE runs past the trained range
    and the model extrapolates, so its numbers would read as results of the model they
    are not.

    Parameters
    ----------
    lengths : sequence of int
        Token positions each item needs (a prompt and its answer: both).
    context : int or None
        The model's ``config.max_position_embeddings`` (None: no limit known, no check).
    name : str
        What the items are, for the message (``"texts"``, ``"prompts"``).
    fix : str
        What to do instead, ending the message.

    Raises
    ------
    ValueError
        Naming the first items beyond the context, their lengths and the context.

    Examples
    --------
    >>> from kvstats.models.texts import check_context
    >>> check_context([100, 64], 128, "texts", "pass max_tokens <= 128")
    >>> check_context([100, 200], 128, "texts", "pass max_tokens <= 128")
    Traceback (most recent call last):
    ...
    ValueError: texts must fit the model's context of max_position_embeddings=128 token positions: item 1 needs 200, longer than the model's context; pass max_tokens <= 128
    """
    if context is None:
        return
    lengths = [int(n) for n in lengths]
    over = [(i, n) for i, n in enumerate(lengths) if n > context]
    if over:
        items = ", ".join(f"item {i} needs {n}" for i, n in over[:5]) + (" ..." if len(over) > 5 else "")
        raise ValueError(f"{name} must fit the model's context of max_position_embeddings={context} "
                         f"token positions: {items}, longer than the model's context; {fix}")


def check_distinct(streams, name: str) -> None:
    """Refuse repeated token streams: each text is an independent unit of the tests.

    ``kl_quality``'s per-text standard error and sign tests, and a capture's
    ``meta["cluster"]``, take each text as one independent draw; a text given twice (or
    two texts equal once truncated) would count one unit twice, with a standard error of
    zero between its copies.

    Parameters
    ----------
    streams : sequence of sequence of int
        The token ids each text contributes (after truncation).
    name : str
        What the items are, for the message.

    Raises
    ------
    ValueError
        Listing each repeated item and the earlier one it repeats.

    Examples
    --------
    >>> from kvstats.models.texts import check_distinct
    >>> check_distinct([[1, 2], [1, 3]], "texts")
    >>> check_distinct([[1, 2], [1, 3], [1, 2]], "texts")
    Traceback (most recent call last):
    ...
    ValueError: texts must be distinct token streams (each text is one independent unit of the tests; a repeat counts one text twice): item 2 repeats item 0
    """
    first: dict[tuple, int] = {}
    repeats = []
    for i, ids in enumerate(streams):
        j = first.setdefault(tuple(ids), i)
        if j != i:
            repeats.append(f"item {i} repeats item {j}")
    if repeats:
        raise ValueError(f"{name} must be distinct token streams (each text is one independent unit of "
                         f"the tests; a repeat counts one text twice): " + ", ".join(repeats[:5])
                         + (" ..." if len(repeats) > 5 else ""))
