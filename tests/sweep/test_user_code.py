"""User code in a sweep: the cell id's digest of it, and failures of it naming the cell.

plan.user_code_digest enters the cell id of a cell computed by a registered scheme or
distribution, so ``resume`` must find the same id in a fresh interpreter for the same
code, and another id after an edit; a user scheme or sampler that raises (any exception)
must say which cell or case it broke in.
"""

import functools
import hashlib
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kvstats
from kvstats.data.register import registered_distribution
from kvstats.quant.register import define_scheme, registered_scheme
from kvstats.quant.uniform import UniformTokenCoder
from kvstats.sweep import replay_trials
from kvstats.sweep.plan import _source_bytes


# every test leaves the registries and plugins as found (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("user_registries")


# A scheme typed without a source file (as at a prompt or in ``python -c``): its digest
# comes from its code, whose set constant iterates in the order of the per-process
# string hash.
_SCRIPT = textwrap.dedent('''
    import kvstats
    from kvstats.quant.uniform import UniformTokenCoder
    from kvstats.sweep import SchemeSpec
    from kvstats.sweep.plan import Cell, user_code_digest
    src = """
    def build(bits, dim, params, key_rng, value_rng, draws):
        assert params.get("mode", "a") in {"a", "b", "c", "d", "e", "f"}
        return bits, UniformTokenCoder(bits, dim, dim), UniformTokenCoder(bits, dim, dim)
    def bits_of(bits, dim, n_tokens, params):
        return (n_tokens * (bits * dim + 32),) * 2
    """
    ns = {"UniformTokenCoder": UniformTokenCoder}
    exec(compile(src, "<string>", "exec"), ns)
    kvstats.register_scheme(kvstats.define_scheme("typed", ns["build"], ns["bits_of"], summary="x"))
    print(user_code_digest(Cell("gaussian", {}, 16, 8, 3, SchemeSpec("typed"))))
''')


def test_a_typed_schemes_digest_is_the_same_in_every_process():
    digests = {subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout.strip()
               for seed in (1, 2)}
    assert len(digests) == 1 and len(digests.pop()) == 64


def _typed(src):
    ns = {}
    exec(compile(textwrap.dedent(src), "<string>", "exec"), ns)
    return ns["f"]


def test_edits_of_typed_code_change_its_digest():
    # inside a comprehension (a nested code object), a global's attribute (a name), a
    # partial's argument: each an edit the digest must see
    pairs = [("def f(x):\n    return [v * 2 for v in x]\n", "def f(x):\n    return [v * 3 for v in x]\n"),
             ("import math\ndef f(x):\n    return math.floor(x)\n",
              "import math\ndef f(x):\n    return math.ceil(x)\n")]
    for a, b in pairs:
        assert _source_bytes(_typed(a)) != _source_bytes(_typed(b))
        assert _source_bytes(_typed(a)) == _source_bytes(_typed(a))
    f = _typed(pairs[0][0])
    assert _source_bytes(functools.partial(f, mode=1)) != _source_bytes(functools.partial(f, mode=2))
    # a function or callable object of a file: the file's bytes
    assert _source_bytes(_typed) == _source_bytes(_Callable()) == open(__file__, "rb").read()


class _Callable:
    def __call__(self, *args):
        return args


class _BrokenCoder(UniformTokenCoder):
    def roundtrip(self, x, out=None):
        raise RuntimeError("coder broke")


def _broken_build(bits, dim, params, key_rng, value_rng, draws):
    return bits, _BrokenCoder(bits, dim, dim), UniformTokenCoder(bits, dim, dim)


def _bits(bits, dim, n_tokens, params):
    return (n_tokens * (bits * dim + 32),) * 2


def _one_trial_only(n_trials, n_keys, dim, rng, params):
    if n_trials > 2:   # passes the sweep's two-trial check, fails on its chunks of 4
        raise RuntimeError("sampler broke")
    return rng.standard_normal((n_trials, n_keys, dim))


_GRID = {"budgets": [3], "dims": [16], "n_keys": [8], "n_trials": 4, "comparisons": []}


def test_a_failure_of_user_code_names_the_cell_and_keeps_its_type():
    with registered_scheme(define_scheme("broken", _broken_build, _bits, summary="x")):
        with pytest.raises(RuntimeError, match="coder broke") as info:
            kvstats.run_sweep({**_GRID, "schemes": ["broken"], "distributions": ["gaussian"]},
                              executor="serial", progress=False)
    assert info.value.__notes__ == ["[cell: 'broken' at n=3, gaussian(-), d=16, N=8]"]
    with registered_distribution("one_only", _one_trial_only):
        with pytest.raises(RuntimeError, match="sampler broke") as info:
            kvstats.run_sweep({**_GRID, "schemes": ["KQV"], "distributions": ["one_only"]},
                              executor="serial", progress=False)
    assert info.value.__notes__ == ["[case: one_only(-), d=16, N=8, trials 0..3]"]
    # a failure in the sweep's check before any compute names the entry
    with registered_distribution("never", lambda *a: np.log("x")):
        with pytest.raises(TypeError, match=r"distribution 'never' params - at d=16, N=8"):
            kvstats.run_sweep({**_GRID, "schemes": ["KQV"], "distributions": ["never"]},
                              executor="serial", progress=False)
    with registered_distribution("never", lambda *a: 1 / 0):
        with pytest.raises(ZeroDivisionError) as info:
            kvstats.run_sweep({**_GRID, "schemes": ["KQV"], "distributions": ["never"]},
                              executor="serial", progress=False)
    assert info.value.__notes__ == ["[distribution 'never' params - at d=16, N=8]"]


_PLUGIN = '''
import kvstats
from kvstats.quant.uniform import UniformTokenCoder

def build(bits, dim, params, key_rng, value_rng, draws):
    return bits, UniformTokenCoder(bits, dim, dim), UniformTokenCoder(bits, dim, dim)

def bits_of(bits, dim, n_tokens, params):
    return (n_tokens * (bits * dim + 32),) * 2

def shifted(n_trials, n_keys, dim, rng, params):
    return params["shift"] + rng.standard_normal((n_trials, n_keys, dim))

kvstats.register_scheme(kvstats.define_scheme("uc_minmax", build, bits_of, summary="min-max"))
kvstats.register_distribution("uc_shifted", shifted, {"shift": 1.0})
'''


def test_replay_of_a_plugin_sweep_and_after_an_edit(tmp_path):
    plugin = tmp_path / "uc_plugin.py"
    plugin.write_text(_PLUGIN)
    cfg = {**_GRID, "n_trials": 5, "chunk_size": 2, "dtype": "float32", "generator": 2,
           "plugins": [str(plugin)], "schemes": ["uc_minmax", "KQV"],
           "distributions": [{"name": "uc_shifted", "params": {"shift": 2.0}}]}
    kvstats.run_sweep(cfg, out=tmp_path / "sweep", executor="serial", progress=False)
    for scheme in ("uc_minmax", "KQV"):   # a user scheme, and a built-in on a user distribution
        r = replay_trials(tmp_path / "sweep", scheme=scheme, trials=[4, 1])
        assert r.data.K.dtype == np.float32
        assert r.profile().equals(r.stored())
    plugin.write_text(_PLUGIN + "# edited\n")
    with pytest.raises(ValueError, match=r"computed by user code other than the sweep in .* ran: "
                       r"the user code file\(s\) \[.*uc_plugin.py'\] changed since"):
        replay_trials(tmp_path / "sweep", scheme="KQV", trials=[0])


@pytest.mark.parametrize("name,other", [("kqv", "KQV"), ("turboquant-mse", "turboquant_mse"),
                                        ("Q4.0", "q4_0"), ("my.coder", "My_Coder")])
def test_a_scheme_name_equal_to_another_up_to_case_or_punctuation_is_refused(name, other):
    # report figure files are named by a lowercase slug: the two would share them
    kvstats.register_scheme(define_scheme("My_Coder", _broken_build, _bits, summary="x"))
    with pytest.raises(ValueError, match=rf"field 'name' '{re.escape(name)}' differs from the scheme "
                       rf"'{other}' only by case or punctuation"):
        kvstats.register_scheme(define_scheme(name, _broken_build, _bits, summary="x"))


@pytest.mark.parametrize("name,other", [("Gaussian", "gaussian"), ("REAL", "real"), ("low-rank", "low_rank"),
                                        ("mine.v2", "Mine_V2")])
def test_a_distribution_name_equal_to_another_up_to_case_or_punctuation_is_refused(name, other):
    kvstats.register_distribution("Mine_V2", _one_trial_only)
    with pytest.raises(ValueError, match=rf"name '{re.escape(name)}' differs from the distribution "
                       rf"'{other}' only by case or punctuation"):
        kvstats.register_distribution(name, _one_trial_only)


def test_a_distributions_defaults_enter_the_digest():
    # the same sampler registered with another default draws other keys for a cell that
    # leaves the parameter out: its id must change, or resume would reuse the old numbers
    from kvstats.sweep import SchemeSpec
    from kvstats.sweep.plan import Cell, user_code_digest

    cell = Cell("defaulted", {}, 16, 8, 3, SchemeSpec("KQV"))
    digests = []
    for shift in (1.0, 2.0, 1.0):
        with registered_distribution("defaulted", _one_trial_only, {"shift": shift}):
            digests.append(user_code_digest(cell))
    assert digests[0] == digests[2] != digests[1]


def test_a_schemes_declared_defaults_enter_the_digest():
    # make_scheme fills a user scheme's declared defaults for its build: another default,
    # other codes for a cell that leaves the parameter out, so another id; a scheme that
    # declares none keeps the id it had before defaults could be declared
    from kvstats.sweep import SchemeSpec
    from kvstats.sweep.plan import Cell, user_code_digest

    cell = Cell("gaussian", {}, 16, 8, 3, SchemeSpec("defaulted"))
    digests = []
    for defaults in ({"group_size": 16}, {"group_size": 32}, {"group_size": 16}, None, {}):
        sdef = define_scheme("defaulted", _broken_build, _bits, summary="x", params=["group_size"],
                             defaults=defaults)
        with registered_scheme(sdef):
            digests.append(user_code_digest(cell))
    assert digests[0] == digests[2] != digests[1] and digests[3] == digests[4] not in digests[:3]
    without = hashlib.sha256(_source_bytes(_broken_build) + _source_bytes(_bits)).hexdigest()
    assert digests[3] == without


def test_typed_code_hashes_and_records_the_user_modules_it_refers_to(import_folder):
    """A scheme typed where there is no file to read (a notebook, ``python -c``) that calls
    a helper module of the user's: an edit of the helper changes the cell ids (else a
    resume reuses the cells the old helper computed) and the manifest names the helper."""
    from kvstats.plugins import user_code
    from kvstats.sweep import SchemeSpec, load_config
    from kvstats.sweep.plan import Cell, user_code_digest

    helper = import_folder("kvstats_test_typed_helper", on_path=True) / "kvstats_test_typed_helper.py"
    helper.write_text("OFFSET = 0\ndef shift(x):\n    return x + OFFSET\n")
    src = f"""
    import {helper.stem} as aid
    def _coders(bits, dim):   # typed code calling typed code that uses the helper
        aid.shift(0)
        return UniformTokenCoder(bits, dim, dim), UniformTokenCoder(bits, dim, dim)
    def build(bits, dim, params, key_rng, value_rng, draws):
        return (bits, *_coders(bits, dim))
    def bits_of(bits, dim, n_tokens, params):
        return (n_tokens * (bits * dim + 32),) * 2
    """
    ns = {"UniformTokenCoder": UniformTokenCoder}
    exec(compile(textwrap.dedent(src), "<string>", "exec"), ns)
    cell = Cell("gaussian", {}, 16, 8, 3, SchemeSpec("typed"))
    with registered_scheme(define_scheme("typed", ns["build"], ns["bits_of"], summary="x")):
        before = user_code_digest(cell)
        script = user_code(load_config({"schemes": ["typed"], "budgets": [3], "distributions": ["gaussian"],
                                        "comparisons": []})).get("script")
        helper.write_text("OFFSET = 1\ndef shift(x):\n    return x + OFFSET\n")
        assert user_code_digest(cell) != before
    assert [(r["module"], r["file"]) for r in script or []] == [(helper.stem, os.path.realpath(helper))]
    assert len(script[0]["sha256"]) == 64


def test_the_manifest_names_the_files_of_a_scripts_registrations():
    """A scheme registered by a script with functions of a file (here this test module):
    the manifest's user code lists the file, which the cell ids hash."""
    from kvstats.plugins import user_code
    from kvstats.sweep import load_config

    with registered_scheme(define_scheme("broken", _broken_build, _bits, summary="x")):
        code = user_code(load_config({"schemes": ["broken"], "budgets": [3], "distributions": ["gaussian"],
                                      "comparisons": []}))
    assert code["schemes"] == {"broken": None}
    assert [r["file"] for r in code["script"]] == [os.path.realpath(__file__)]


# A plugin scheme that warns on every chunk it codes (in a worker process, in a pool).
WARNING_PLUGIN = """
import warnings
import numpy as np
import kvstats
from kvstats.quant.uniform import UniformTokenCoder

def build(bits, dim, params, key_rng, value_rng, draws):
    if int(np.prod(draws)) > 1:   # a chunk: in a worker process
        warnings.warn("noisy: a chunk was coded", UserWarning)
    return bits, UniformTokenCoder(bits, dim, dim), UniformTokenCoder(bits, dim, dim)

def bits_of(bits, dim, n_tokens, params):
    return (n_tokens * (bits * dim + 32),) * 2

kvstats.register_scheme(kvstats.define_scheme("noisy", build, bits_of, summary="warns per chunk"))
"""


def test_a_workers_warnings_reach_the_caller_once_under_its_filters(tmp_path):
    """A plugin scheme warns once per chunk (three chunks in each of two tasks, in two
    worker processes): the caller gets it once, with the plugin's file and line, and a
    filter of the caller's by module (the plugin's) silences it, as it would a warning
    raised in this process."""
    import warnings

    from kvstats.sweep import run_sweep

    (tmp_path / "noisy.py").write_text(WARNING_PLUGIN)
    cfg = {"seed": 1, "budgets": [2], "dims": [16, 24], "n_keys": [8], "n_trials": 6,
           "chunk_size": 2, "comparisons": [], "plugins": [str(tmp_path / "noisy.py")],
           "schemes": ["noisy"], "distributions": ["gaussian"]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        run_sweep(cfg, workers=2, progress=False)
    assert [(str(w.message), w.filename, w.lineno) for w in caught] == [
        ("noisy: a chunk was coded", str(tmp_path / "noisy.py"), 9)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        warnings.filterwarnings("ignore", module="kvstats_plugin_noisy")
        run_sweep(cfg, workers=2, progress=False)
    assert caught == []


def _cli_sweep_stderr(tmp_path, capfd, plugin: str) -> dict[str, str]:
    """stderr of `kvstats sweep` with ``plugin``'s scheme, in a pool of 2 and serially."""
    from kvstats.cli import main

    (tmp_path / "noisy.py").write_text(plugin)
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[sweep]\nseed = 1\nbudgets = [2]\ndims = [16, 24]\nn_keys = [8]\nn_trials = 6\n'
                   f'chunk_size = 2\ncomparisons = []\nplugins = ["{tmp_path / "noisy.py"}"]\n'
                   '[[schemes]]\nname = "noisy"\n[[distributions]]\nname = "gaussian"\n')
    err = {}
    for workers in ("2", "1"):
        assert main(["sweep", "--config", str(cfg), "--out", str(tmp_path / workers),
                     "--workers", workers, "--no-progress", "--no-report"]) == 0
        err[workers] = capfd.readouterr().err
    return err


def test_a_workers_warning_prints_once_as_a_kvstats_line(tmp_path, capfd):
    """A warning raised in a pool worker (a plugin scheme's, once per chunk of two tasks)
    reaches the command line as a warning of this process: one `kvstats sweep: warning:`
    line (workers printed it themselves, in Python's format with its source line, per
    worker and task); in a pool or serially, a warning every chunk repeats shows once
    (serially it showed per chunk: the filters' once-per-place record is cleared
    whenever code changes the filters)."""
    for err in _cli_sweep_stderr(tmp_path, capfd, WARNING_PLUGIN).values():
        assert err.count("noisy: a chunk was coded") == 1, err
        assert "kvstats sweep: warning: noisy: a chunk was coded\n" in err, err


def test_a_warning_whose_text_counts_its_chunk_shows_once(tmp_path, capfd):
    """A warning whose message differs per chunk (the norm-range warnings count the chunk's
    vectors) is still one warning of one place: shown once per sweep, serially and in a
    pool (each distinct text showed before: one line per chunk)."""
    plugin = WARNING_PLUGIN.replace('warnings.warn("noisy: a chunk was coded", UserWarning)',
                                    'warnings.warn(f"noisy: {key_rng.random():.6f}", UserWarning)')
    for err in _cli_sweep_stderr(tmp_path, capfd, plugin).values():
        assert err.count("kvstats sweep: warning: noisy: ") == 1, err
