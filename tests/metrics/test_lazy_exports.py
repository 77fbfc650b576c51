"""The lazy public names (kvstats._lazy) of kvstats and kvstats.metrics, as a notebook sees them."""

from __future__ import annotations

import kvstats
import kvstats.metrics


def test_dir_lists_the_lazy_names_and_what_the_package_defines():
    """Tab completion reads dir(): it listed the lazy names only, so ``__version__``
    (in ``kvstats.__all__``) and ``__doc__`` were missing from ``dir(kvstats)``."""
    for package in (kvstats, kvstats.metrics):
        names = dir(package)
        assert set(package.__all__) <= set(names)
        assert {"__doc__", "__name__"} <= set(names)
        assert names == sorted(names)
    assert "__version__" in kvstats.__all__ and "__version__" in dir(kvstats)


def test_every_public_name_resolves():
    for package in (kvstats, kvstats.metrics):
        for name in package.__all__:
            assert getattr(package, name) is getattr(package, name)
