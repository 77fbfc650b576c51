"""Lazy public exports for a package's ``__init__`` (PEP 562 module ``__getattr__``).

Packages list their public names with the module that defines each; a name is imported
on first access, so ``import kvstats`` never imports torch or jax and stays fast.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_exports(package: str, namespace: dict[str, Any], exports: Mapping[str, str],
                 submodules: Iterable[str] = ()) -> tuple[list[str], Callable, Callable]:
    """Return ``(__all__, __getattr__, __dir__)`` for ``package``.

    ``exports`` maps a public name to the full module path that defines it;
    ``submodules`` are short names of subpackages reachable as attributes. Loaded values
    are cached in ``namespace`` (the package's ``globals()``). ``dir(package)`` lists the
    lazy names with what the package defines itself (``__version__``, ``__doc__``), as
    for a module without lazy names; ``__all__`` is the lazy names alone.

    Examples
    --------
    >>> import types
    >>> pkg = types.ModuleType("pkg")
    >>> pkg.__version__ = "1.0"
    >>> pkg.__all__, pkg.__getattr__, pkg.__dir__ = lazy_exports(
    ...     "pkg", vars(pkg), {"sqrt": "math"})
    >>> pkg.sqrt(4.0), "sqrt" in vars(pkg)          # imported on first access, then cached
    (2.0, True)
    >>> pkg.__all__, "__version__" in dir(pkg), "sqrt" in dir(pkg)
    (['sqrt'], True, True)
    """
    submodules = set(submodules)
    names = sorted(exports) + sorted(submodules)

    def __getattr__(name: str) -> Any:
        if name in exports:
            value = getattr(importlib.import_module(exports[name]), name)
        elif name in submodules:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return names, __getattr__, __dir__
