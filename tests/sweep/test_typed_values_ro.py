"""Cell ids of typed code see the values it reads (referee RO, finding F3).

A sampler typed in a notebook or ``python -c`` reading a global (``SCALE * rng...``), a
closure cell, or a ``functools.partial`` bound to a dict or array kept its cell id when
that value changed, so ``resume`` reused the old numbers. The digest must change with the
value; a value that cannot be hashed by content warns; code naming only modules, builtins
and functions of files keeps the digest it had (earlier results resume).
"""

from __future__ import annotations

import functools
import textwrap
import threading

import numpy as np
import pytest

import kvstats
from kvstats.sweep import SchemeSpec
from kvstats.sweep.plan import Cell, _code_text, _const_text, _source_bytes, user_code_digest

pytestmark = pytest.mark.usefixtures("user_registries")


def _typed(src, **space):
    """``f`` of ``src`` exec'd in a namespace holding ``space`` (no source file: typed code)."""
    exec(compile(textwrap.dedent(src), "<string>", "exec"), space)
    return space["f"]


_GLOBAL = """
def f(n_trials, n_keys, dim, rng, params):
    return SCALE * rng.laplace(size=(n_trials, n_keys, dim))
"""


@pytest.mark.parametrize("a,b", [(1.0, 5.0), ({"scale": 1}, {"scale": 5}), ([1, 2], [1, 3]),
                                 (np.ones(3), np.full(3, 2.0)), (np.ones(3), np.ones(3, np.float32)),
                                 (np.ones((2, 3)), np.ones((3, 2)))])
def test_a_global_value_typed_code_reads_enters_its_digest(a, b):
    assert _source_bytes(_typed(_GLOBAL, SCALE=a)) != _source_bytes(_typed(_GLOBAL, SCALE=b))
    assert _source_bytes(_typed(_GLOBAL, SCALE=a)) == _source_bytes(_typed(_GLOBAL, SCALE=a))


def test_the_referees_case_a_global_edit_changes_the_cell_id():
    ids = []
    for scale in (1.0, 5.0):
        kvstats.register_distribution("nbdist", _typed(_GLOBAL, SCALE=scale), {}, summary="notebook")
        ids.append(user_code_digest(Cell("nbdist", {}, 64, 64, 3, SchemeSpec("KQV"))))
        kvstats.data.register.unregister_distribution("nbdist")
    assert ids[0] != ids[1]


def test_closure_cells_and_typed_helpers_enter_the_digest():
    make = _typed("def f(scale):\n    def g(x):\n        return scale * x\n    return g\n")
    assert _source_bytes(make(1.0)) != _source_bytes(make(2.0))
    # a typed helper the function calls: its code and the globals it reads
    src = "def helper(x):\n    return OFFSET + x\ndef f(x):\n    return helper(x)\n"
    assert _source_bytes(_typed(src, OFFSET=0)) != _source_bytes(_typed(src, OFFSET=1))
    other = "def helper(x):\n    return OFFSET - x\ndef f(x):\n    return helper(x)\n"
    assert _source_bytes(_typed(src, OFFSET=0)) != _source_bytes(_typed(other, OFFSET=0))


def test_a_partials_dict_and_array_arguments_are_hashed_by_content():
    f = _typed("def f(x, cfg=None):\n    return x\n")
    for a, b in [({"scale": 1}, {"scale": 5}), (np.arange(3), np.arange(3) + 1), ({"w": np.ones(2)}, {"w": np.zeros(2)})]:
        assert _source_bytes(functools.partial(f, cfg=a)) != _source_bytes(functools.partial(f, cfg=b))
        assert _source_bytes(functools.partial(f, cfg=a)) == _source_bytes(functools.partial(f, cfg=a))
    # exact constants keep the text they had (ids of partials of those unchanged)
    assert _source_bytes(functools.partial(f, 2, cfg="a")).startswith(_const_text(((2,), (("cfg", "a"),))).encode())


def test_a_value_that_cannot_be_hashed_by_content_warns():
    f = _typed("def f(x):\n    with LOCK:\n        return x\n", LOCK=threading.Lock())
    with pytest.warns(UserWarning, match=r"cannot see the value of 'LOCK' of typed function 'f' \(a lock"):
        _source_bytes(f)


def test_typed_code_naming_only_modules_and_code_of_files_keeps_its_digest():
    # the digest before the fix: the code alone (earlier typed results resume)
    f = _typed("import math\ndef f(x):\n    return math.floor(np.sum(x)) + functools.reduce(max, x)\n",
               np=np, functools=functools)
    assert _source_bytes(f) == _code_text(f.__code__)
    g = _typed("def f(x):\n    return Cell(x) if textwrap else np.exp(x)\n", Cell=Cell, np=np, textwrap=textwrap)
    assert _source_bytes(g) == _code_text(g.__code__)


_HOLDER = """
import hashlib, sys
from kvstats.sweep.plan import _source_bytes

class Holder:
    def __init__(self, w):
        self.names = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta"}
        self.w = w

space = {"H": Holder(float(sys.argv[1]))}
exec(compile("def f(x):\\n    return H.w * x\\n", "<string>", "exec"), space)
print(hashlib.sha256(_source_bytes(space["f"])).hexdigest())
"""


def test_an_object_holding_a_set_has_one_digest_under_every_string_hash(tmp_path):
    # its pickle's bytes follow PYTHONHASHSEED (the set's order): a notebook's resumed
    # sweep recomputed every cell after a restart, and pool workers disagreed
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "holder.py"
    script.write_text(_HOLDER)

    def digest(seed, w):
        # the kvstats this test imported (not whichever the script's folder would find)
        env = {**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(Path(kvstats.__file__).parents[1])}
        return subprocess.run([sys.executable, str(script), str(w)], env=env, check=True,
                              capture_output=True, text=True).stdout.strip()

    same = {digest(seed, 2.0) for seed in (1, 2, 3)}
    assert len(same) == 1
    assert digest(1, 3.0) not in same   # its content still counts
