"""Each public name's docstring examples, its methods' included, run pasted into a fresh session.

``doctest.testmod`` (tests/test_docstrings.py) runs an example in its defining module's
globals, so an example that uses ``np`` or its own name without importing them passes there
and fails for a user. Here each runs on empty globals, as a fresh interpreter would: an
exported function's or class's docstring and those of the class's methods (DocTestFinder's
default recursion), and an exported submodule's (``kvstats.theory``) with every function
defined in it.
"""

from __future__ import annotations

import doctest

import kvstats


def _failures(obj, name):
    """Names of the failing examples of ``obj`` (and its methods), run on fresh globals."""
    finder = doctest.DocTestFinder()
    failed = []
    for test in finder.find(obj, name, globs={}):
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        result = runner.run(test, out=lambda text: None)
        if result.failed:
            failed.append(f"{test.name} ({result.failed} of {result.attempted})")
    return failed


def test_public_examples_run_on_fresh_globals():
    names = [n for n in kvstats.__all__ if n != "__version__"]
    failed = [f for n in names for f in _failures(getattr(kvstats, n), n)]
    assert not failed, f"examples that fail pasted into a fresh session: {failed}"


def test_the_check_sees_a_missing_import():
    # a docstring whose example leans on module globals fails here (the check can fail)
    def leaky():
        """
        >>> np.zeros(2).shape
        (2,)
        """

    assert _failures(leaky, "leaky") == ["leaky (1 of 1)"]


def test_the_check_sees_a_method_missing_an_import():
    # a method's example is checked too, not only its class's docstring
    class Leaky:
        """
        >>> 1 + 1
        2
        """

        def size(self):
            """
            >>> np.zeros(2).size
            2
            """

    assert _failures(Leaky, "Leaky") == ["Leaky.size (1 of 1)"]
