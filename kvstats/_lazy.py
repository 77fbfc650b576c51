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
    are cached in ``namespace`` (the package's ``globals()``).
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
        return names

    return names, __getattr__, __dir__
