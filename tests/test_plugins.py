"""Schemes and distributions of a researcher's own: registration, its errors, the contract
check, sweep plugins under fork and spawn workers, the manifest record, the command line.

Every test leaves the registries as it found them (tests/conftest.py's user_registries
restores them and forgets the plugins it imported), so nothing leaks into other tests of
the worker.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import json
import multiprocessing
import os
import sys
import textwrap

import numpy as np
import pytest

import kvstats
from kvstats import plugin_relocation, plugins
from kvstats.data import register as data_register
from kvstats.data import synthetic
from kvstats.quant import contract, register, registry
from kvstats.quant.register import define_scheme, register_scheme, registered_scheme, unregister_scheme
from kvstats.quant.uniform import UniformTokenCoder
from kvstats.user_imports import file_sha256

# a plugin module: a per-token min-max scheme (kvstats' uniform coder, one group per
# vector) and a shifted-Gaussian key distribution
PLUGIN = textwrap.dedent('''
    from kvstats.data.register import register_distribution
    from kvstats.quant.register import define_scheme, register_scheme
    from kvstats.quant.uniform import UniformTokenCoder

    def build(bits, dim, params, key_rng, value_rng, draws):
        return bits, UniformTokenCoder(bits, dim, dim), UniformTokenCoder(bits, dim, dim)

    def stored(bits, dim, n_tokens, params):
        side = n_tokens * (bits * dim + 32)
        return side, side

    def shifted(n_trials, n_keys, dim, rng, params):
        return params["shift"] + rng.standard_normal((n_trials, n_keys, dim))

    register_scheme(define_scheme("plug_minmax", build, stored, summary="per-token min-max"))
    register_distribution("plug_shifted", shifted, {"shift": 1.0})
''')


# every test leaves the registries and plugins as found (tests/conftest.py user_registries)
pytestmark = pytest.mark.usefixtures("user_registries")


def _build(bits, dim, params, key_rng, value_rng, draws):
    return bits, UniformTokenCoder(bits, dim, dim), UniformTokenCoder(bits, dim, dim)


def _stored(bits, dim, n_tokens, params):
    side = n_tokens * (bits * dim + 32)
    return side, side


def _minmax(name="minmax", **fields):
    return define_scheme(name, _build, _stored, summary="per-token min-max", **fields)


def _config(tmp_path, plugin_ref="plug.py", *, schemes=("plug_minmax", "KQV"), dists=None, trials=6):
    (tmp_path / "plug.py").write_text(PLUGIN)
    dists = dists or ['{ name = "plug_shifted", params = { shift = 2.0 } }', '"gaussian"']
    text = (f'[sweep]\nplugins = ["{plugin_ref}"]\nbudgets = [3]\ndims = [16]\nn_keys = [32]\n'
            f'n_trials = {trials}\nchunk_size = 3\nschemes = {json.dumps(list(schemes))}\n'
            f'distributions = [{", ".join(dists)}]\ncomparisons = [["plug_minmax", "KQV"]]\n')
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    return path


# ------------------------------------------------------------------ registration
def test_a_registered_scheme_is_used_like_a_built_in():
    with registered_scheme(_minmax()):
        assert "minmax" in kvstats.quant.REGISTRY and "minmax" in register.scheme_names()
        assert "minmax" not in kvstats.SCHEMES            # the built-in names stay a constant
        assert registry.parse_scheme_name("minmax", {})[0].name == "minmax"
        scheme = kvstats.make_scheme("minmax", 4, 64)
        assert scheme.bits_per_coord(10).total == 4.5 == registry.scheme_def("minmax").expected_bits(4, 64, 10)
        assert register.user_schemes() == {"minmax": None}
        cfg = kvstats.SweepConfig.from_dict({"schemes": ["minmax"], "distributions": ["gaussian"]})
        assert cfg.schemes[0].name == "minmax"
    assert "minmax" not in kvstats.quant.REGISTRY and register.user_schemes() == {}
    with pytest.raises(ValueError, match="must be registered in this process first"):
        kvstats.make_scheme("minmax", 4, 64)


@pytest.mark.parametrize("name,message", [
    ("KQV", "'KQV' clashes with a built-in"), ("K4V2", "'K4V2' clashes with a built-in"),
    ("k9v9", "'k9v9' clashes with a built-in"), ("2fast", "must start with a letter"),
    ("a b", "must start with a letter")])
def test_a_clashing_or_malformed_name_is_refused(name, message):
    with pytest.raises(ValueError, match=message):
        register_scheme(_minmax(name))
    assert name not in registry._TABLE or name in registry.BUILTIN


def test_a_second_registration_of_a_name_is_refused_until_unregistered():
    register_scheme(_minmax())
    with pytest.raises(ValueError, match="'minmax' is already registered; unregister_scheme"):
        register_scheme(_minmax())
    unregister_scheme("minmax")
    register_scheme(_minmax())
    with pytest.raises(ValueError, match="a built-in cannot be unregistered"):
        unregister_scheme("KQV")


@pytest.mark.parametrize("fields,error,field", [
    ({"summary": ""}, TypeError, "summary"),
    ({"params": frozenset({3})}, TypeError, "params"),
    ({"params": frozenset({"bits"})}, ValueError, "params"),
    ({"min_bits": 0}, ValueError, "min_bits"),
    ({"max_bits": 9}, ValueError, "max_bits"),
    ({"max_bits": 2.0}, TypeError, "max_bits"),
    ({"min_bits": 5, "max_bits": 4}, ValueError, "min_bits"),
    ({"fixed_budget": 1}, TypeError, "fixed_budget"),
    ({"gpu": True}, ValueError, "gpu"),
    ({"token_group_param": "group"}, ValueError, "token_group_param"),
    ({"key_theory": "exact"}, ValueError, "key_theory"),
    ({"build": None}, TypeError, "build"),
    ({"_bits": "4"}, TypeError, "expected_bits"),
    ({"_randomized": True}, TypeError, "randomized"),
    ({"example_params": {"rank": 3}}, ValueError, "example_params"),
    ({"token_group_default": 0}, ValueError, "token_group_default"),
    ({"defaults": {"rank": 3}}, ValueError, "defaults"),
    ({"defaults": [("rank", 3)]}, TypeError, "defaults"),
])
def test_a_missing_or_ill_typed_field_is_named(fields, error, field):
    with pytest.raises(error, match=f"SchemeDef field '{field}'"):
        register_scheme(dataclasses.replace(_minmax(), **fields))
    assert "minmax" not in registry._TABLE
    with pytest.raises(TypeError, match="must be a SchemeDef"):
        register_scheme({"name": "minmax"})


GROUPED = {"group_size": 16}


def _build_grouped(bits, dim, params, key_rng, value_rng, draws):
    group = params["group_size"]   # the defaults filled in (make_scheme fills them)
    return bits, UniformTokenCoder(bits, dim, group), UniformTokenCoder(bits, dim, group)


def _stored_grouped(bits, dim, n_tokens, params):   # the defaults filled in
    side = n_tokens * (bits * dim + 32 * -(-dim // params["group_size"]))
    return side, side


def test_declared_defaults_join_a_user_schemes_identity_and_fill_its_formulas():
    """define_scheme(defaults=...): a config spelling the default out names the same
    scheme (refused as a duplicate, as for a built-in), another value another one, and
    expected_bits reads the default (a KeyError without it). Without declared defaults (an
    older plugin) the two spellings stay two schemes."""
    grouped = define_scheme("grouped", _build_grouped, _stored_grouped, summary="min-max in groups",
                            params=["group_size"], defaults=GROUPED)
    spelled_out = {"name": "grouped", "label": "g16", "params": {"group_size": 16}}
    twice = {"distributions": ["gaussian"], "comparisons": [], "schemes": ["grouped", spelled_out]}
    with registered_scheme(grouped):
        assert registry.resolved_scheme("grouped", {}) == ("grouped", {"group_size": 16})
        assert registry.resolved_scheme("grouped", {"group_size": 16.0}) == ("grouped", {"group_size": 16})
        assert registry.resolved_scheme("grouped", {"group_size": 32}) == ("grouped", {"group_size": 32})
        with pytest.raises(ValueError, match="'grouped' and 'g16' are the same scheme"):
            kvstats.SweepConfig.from_dict(twice)
        built = kvstats.make_scheme("grouped", 4, 64)
        assert grouped.expected_bits(4, 64, 10) == 6.0 == built.bits_per_coord(10).total
        assert grouped.expected_bits(4, 64, 10, group_size=64) == 4.5
    with registered_scheme(_minmax("grouped", params=["group_size"])):
        assert registry.resolved_scheme("grouped", {}) == ("grouped", {})
        assert len(kvstats.SweepConfig.from_dict(twice).schemes) == 2


def test_a_user_build_gets_the_declared_defaults_and_the_scheme_records_the_settings_given():
    """make_scheme hands a user's build the parameters with its declared defaults filled in
    (as a built-in's), and the Scheme records them as given (describe and manifests as
    before); a scheme without declared defaults (an older plugin) gets what was given."""
    seen = []

    def build(bits, dim, params, key_rng, value_rng, draws):
        seen.append(dict(params))
        return _build(bits, dim, params, key_rng, value_rng, draws)

    for defaults, given, expected in (({"group_size": 16}, {}, {"group_size": 16}),
                                      ({"group_size": 16}, {"group_size": 8}, {"group_size": 8}),
                                      (None, {}, {})):
        sdef = define_scheme("recorder", build, _stored, summary="x", params=["group_size"],
                             defaults=defaults)
        with registered_scheme(sdef):
            scheme = kvstats.make_scheme("recorder", 4, 64, **given)
        assert seen.pop() == expected
        assert scheme.params == given and scheme.describe()["params"] == given


def test_a_user_schemes_own_rotation_parameter_is_its_builders_to_check():
    """make_scheme checks rotation/sketch against the built-ins' choices for built-ins only:
    a plugin may mean something else by a parameter of that name (it was refused)."""
    seen = []

    def build(bits, dim, params, key_rng, value_rng, draws):
        seen.append(params["rotation"])
        return _build(bits, dim, {}, key_rng, value_rng, draws)

    sdef = define_scheme("own_rotation", build, _stored, summary="x", params=["rotation"])
    with registered_scheme(sdef):
        kvstats.make_scheme("own_rotation", 4, 64, rotation="learned")
    assert seen == ["learned"]
    with pytest.raises(ValueError, match="rotation must be one of"):
        kvstats.make_scheme("KQV", 4, 64, rotation="learned")


def test_a_registered_distribution_is_sampled_and_checked():
    def shifted(n_trials, n_keys, dim, rng, params):
        return params["shift"] + rng.standard_normal((n_trials, n_keys, dim))

    with data_register.registered_distribution("shifted", shifted, {"shift": 1.0}):
        t = kvstats.sample("shifted", 4, 32, 8, seed=3, shift=5.0, dtype=np.float32)
        assert t.K.dtype == np.float32 and abs(float(t.K.mean()) - 5) < 0.2
        # trial t is the same whatever n_trials (the sampler draws in trial order)
        assert np.array_equal(kvstats.sample("shifted", 2, 32, 8, seed=3, shift=5.0).K,
                              kvstats.sample("shifted", 4, 32, 8, seed=3, shift=5.0).K[:2])
        assert kvstats.sample("gaussian", 1, 8, 4, value_distribution="shifted").V.mean() > 0.3
        assert synthetic.default_params("shifted") == {"shift": 1.0}
        with pytest.raises(ValueError, match=r"\['nu'\] not accepted by distribution 'shifted'"):
            kvstats.sample("shifted", 1, 8, 4, nu=3)
        with pytest.raises(ValueError, match="'gaussian' clashes with a built-in"):
            kvstats.register_distribution("gaussian", shifted)
        with pytest.raises(ValueError, match="already a registered distribution"):
            kvstats.register_distribution("shifted", shifted)
        with pytest.raises(TypeError, match="sampler must be a callable"):
            kvstats.register_distribution("other", "shifted")
        with pytest.raises(TypeError, match="defaults must map str"):
            kvstats.register_distribution("other", shifted, {"shift": [1.0]})
    assert "shifted" not in data_register.distribution_names() and synthetic.DISTRIBUTIONS[0] == "gaussian"


def test_a_sampler_returning_the_wrong_shape_or_nan_is_an_error():
    with data_register.registered_distribution("flat", lambda n, N, d, rng, p: np.zeros((n, N))):
        with pytest.raises(ValueError, match=r"'flat': its sampler must return a real array of shape"):
            kvstats.sample("flat", 2, 8, 4)
    with data_register.registered_distribution("nan", lambda n, N, d, rng, p: np.full((n, N, d), np.nan)):
        with pytest.raises(ValueError, match="'nan': its sampler returned 64 NaN/inf"):
            kvstats.sample("nan", 2, 8, 4)


# ------------------------------------------------------------------ the contract
def test_check_scheme_passes_an_honest_scheme_and_catches_a_lying_one():
    register_scheme(_minmax())
    assert set(kvstats.check_scheme("minmax").values()) == {"ok"}
    # expected_bits that forget the per-vector scale and zero (32 bits): caught, named
    register_scheme(define_scheme("liar", _build, lambda b, d, n, p: (n * b * d,) * 2, summary="liar"))
    with pytest.raises(contract.SchemeContractError, match=r"(?s)'liar' breaks 1 clause.*- expected_bits: .*"
                       r"store 1\.5 bits per coordinate \(stored_bits\), expected_bits says 1\.0"):
        kvstats.check_scheme("liar")
    # a scheme claiming randomness it does not have: its codes do not change with the
    # seed, nor broadcast against independent draws
    register_scheme(_minmax("fake_random", randomized=True))
    account = kvstats.check_scheme("fake_random", raise_on_failure=False)
    assert [c for c, m in account.items() if m != "ok"] == ["broadcast", "seeds"]
    assert "randomized=True" in account["seeds"]


class _NoisyRoundtrip(UniformTokenCoder):
    def roundtrip(self, x):          # not decode(encode(x)): a shortcut that drifted
        return super().roundtrip(x) * (1 + 1e-7)


class _Verbatim(UniformTokenCoder):
    def roundtrip(self, x):          # returns its input: nothing was quantized
        return np.array(x, copy=True)

    def decode(self, codes):
        return self._last

    def encode(self, x):
        self._last = np.array(x, copy=True)
        return super().encode(x)


class _Padded(UniformTokenCoder):
    def stored_bits(self, n_tokens):  # counts more than it stores (and expected_bits agrees)
        return {**super().stored_bits(n_tokens), "pad": 8.0 * n_tokens}


class _PaddedOdd(UniformTokenCoder):
    def stored_bits(self, n_tokens):  # counts padding of d to a power of two it never stores
        pad = (1 << (self.dim - 1).bit_length()) - self.dim
        return {**super().stored_bits(n_tokens), "pad": 3.0 * pad * n_tokens}


@dataclasses.dataclass(frozen=True)
class _Tagged:
    inner: object
    tag: np.ndarray      # a byte per vector the accounting forgets

    @property
    def nbytes(self):
        return self.inner.nbytes + self.tag.nbytes


class _Unaccounted(UniformTokenCoder):
    def encode(self, x):             # stores a byte per vector more than stored_bits counts
        return _Tagged(super().encode(x), np.zeros(np.shape(x)[:-1], np.uint8))

    def decode(self, codes):
        return super().decode(codes.inner)


@pytest.mark.parametrize("coder,clause", [(_NoisyRoundtrip, "roundtrip"), (_Verbatim, "lossy"),
                                          (_Padded, "stored_bytes"), (_Unaccounted, "stored_bytes"),
                                          (_PaddedOdd, "stored_bytes")])
def test_check_scheme_catches_a_broken_coder(coder, clause):
    def build(bits, dim, params, key_rng, value_rng, draws):
        return bits, UniformTokenCoder(bits, dim, dim), coder(bits, dim, dim)

    def stored(bits, dim, n_tokens, params):
        key, value = _stored(bits, dim, n_tokens, params)
        extra = {_Padded: 8, _PaddedOdd: 3 * ((1 << (dim - 1).bit_length()) - dim)}.get(coder, 0)
        return key, value + extra * n_tokens

    register_scheme(define_scheme("broken", build, stored, summary="one broken side"))
    account = kvstats.check_scheme("broken", raise_on_failure=False)
    assert clause in [c for c, m in account.items() if m != "ok"], account


def test_check_scheme_reports_a_crash_of_the_users_code():
    def broken(bits, dim, params, key_rng, value_rng, draws):
        raise RuntimeError("my bug")

    register_scheme(define_scheme("broken", broken, _stored, summary="broken"))
    account = kvstats.check_scheme("broken", raise_on_failure=False)
    assert account["roundtrip"] == "scheme 'broken' raised RuntimeError: my bug"
    with pytest.raises(TypeError, match="raise_on_failure must be True or False"):
        kvstats.check_scheme("broken", raise_on_failure="no")


# ------------------------------------------------------------------ sweeps with plugins
def test_plugins_register_before_the_grid_is_checked_and_resolve_against_the_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path.parent)   # a relative plugin path is the config file's folder's
    cfg = kvstats.SweepConfig.from_toml(_config(tmp_path))
    assert cfg.plugins == (str(tmp_path / "plug.py"),)
    assert [s.name for s in cfg.schemes] == ["plug_minmax", "KQV"]
    assert kvstats.SweepConfig.from_dict(cfg.to_dict()) == cfg        # what the manifest keeps
    assert "plugins" not in kvstats.SweepConfig.from_dict(
        {"schemes": ["KQV"], "distributions": ["gaussian"]}).to_dict()   # old fingerprints hold


# JAX warns at any fork once another test of this worker imported it; the forked workers
# here run only kvstats' numpy code, never JAX, so none of its locks is taken in them
@pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_sweep_with_plugins_runs_in_fork_and_spawn_workers(tmp_path, method):
    path = _config(tmp_path)
    with cf.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context(method)) as pool:
        # workers started before the plugin is imported here: fork workers do not inherit
        # it either, so both kinds must import it themselves
        assert list(pool.map(abs, [-1, -2])) == [1, 2]
        serial = kvstats.run_sweep(path, executor="serial", progress=False)
        pooled = kvstats.run_sweep(path, out=tmp_path / "out", executor=pool, progress=False)
    assert sorted(pooled.frame["scheme"].unique()) == ["KQV", "plug_minmax"]
    assert set(pooled.frame["distribution"]) == {"plug_shifted", "gaussian"}
    assert pooled.frame.equals(serial.frame)
    code = json.loads((tmp_path / "out" / "manifest.json").read_text())["user_code"]
    record = code["plugins"][0]
    assert record["file"] == str(tmp_path / "plug.py") and record["kind"] == "file"
    assert len(record["sha256"]) == 64
    assert code["schemes"] == {"plug_minmax": str(tmp_path / "plug.py")}
    assert code["distributions"] == {"plug_shifted": str(tmp_path / "plug.py")}
    # the report's loader reads the config back and imports the plugin again
    loaded = kvstats.load_result(tmp_path / "out")
    assert loaded.config.plugins == (str(tmp_path / "plug.py"),) and len(loaded.frame) == len(serial.frame)


def test_a_script_registration_reaches_spawn_workers(tmp_path):
    register_scheme(_minmax())
    config = {"schemes": ["minmax", "KQV"], "budgets": [3], "distributions": ["gaussian", "heavy_tailed"],
              "dims": [16], "n_keys": [32], "n_trials": 6, "chunk_size": 3, "comparisons": []}
    serial = kvstats.run_sweep(config, executor="serial", progress=False)
    with cf.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        pooled = kvstats.run_sweep(config, executor=pool, progress=False)
    assert pooled.frame.equals(serial.frame)
    # the file that defines the script's functions (this module) is named with its hash
    assert pooled.manifest["user_code"] == {"plugins": [], "schemes": {"minmax": None}, "distributions": {},
                                            "script": [{"module": __name__, "file": os.path.realpath(__file__),
                                                        "sha256": file_sha256(__file__)}]}
    assert "user_code" not in kvstats.run_sweep({**config, "schemes": ["KQV"]}, executor="serial",
                                                progress=False).manifest


def test_an_unpicklable_registration_runs_the_default_pool_serially():
    register_scheme(define_scheme("local", lambda *a: _build(*a), _stored, summary="a lambda"))
    config = {"schemes": ["local"], "budgets": [3], "distributions": ["gaussian", "heavy_tailed"],
              "dims": [16], "n_keys": [32], "n_trials": 4, "comparisons": []}
    with pytest.warns(RuntimeWarning, match="cannot be sent to worker processes") as caught:
        result = kvstats.run_sweep(config, workers=2, progress=False)
    assert result.manifest["executor"] == "serial" and len(result.frame) == 8
    assert {w.filename for w in caught} == {__file__}   # points at the user's run_sweep call


@pytest.mark.parametrize("body,message", [
    (None, r"config \[sweep\] plugins: file '.*missing\.py' does not exist"),
    ("raise RuntimeError('half-written')", r"config \[sweep\] plugins: importing file '.*plug\.py' "
                                           r"failed: RuntimeError: half-written"),
    ("def broken(:\n", r"config \[sweep\] plugins: importing file '.*plug\.py' failed: SyntaxError"),
])
def test_a_missing_or_broken_plugin_names_the_key_and_the_file(tmp_path, body, message):
    path = _config(tmp_path, "missing.py" if body is None else "plug.py")
    if body is not None:
        (tmp_path / "plug.py").write_text(PLUGIN + body)
    with pytest.raises(plugins.PluginError, match=message):
        kvstats.SweepConfig.from_toml(path)
    # what the plugin registered before failing is gone; a fixed file then loads
    assert "plug_minmax" not in registry._TABLE and "plug_shifted" not in data_register._USER
    (tmp_path / "plug.py").write_text(PLUGIN)
    if body is not None:
        assert kvstats.SweepConfig.from_toml(path).plugins == (str(tmp_path / "plug.py"),)


def test_a_config_naming_a_scheme_no_plugin_registered_says_what_each_plugin_did(tmp_path):
    # a script that registers in main() (as examples/own_scheme.py did), named as a plugin:
    # importing it registers nothing; the error named neither the plugin nor why
    (tmp_path / "plug.py").write_text(PLUGIN)
    (tmp_path / "script.py").write_text(PLUGIN.replace("register_scheme(define_scheme(", "MINE = (define_scheme(")
                                        .replace("register_distribution(", "def main():\n    register_distribution(")
                                        + "\nif __name__ == '__main__':\n    register_scheme(MINE)\n    main()\n")
    base = {"distributions": ["gaussian"], "comparisons": []}
    with pytest.raises(ValueError) as err:
        kvstats.SweepConfig.from_dict({**base, "plugins": ["script.py", "plug.py"], "schemes": ["plug_minmax2"]},
                                      base_dir=tmp_path)
    message = str(err.value)
    assert "received 'plug_minmax2' (did you mean 'plug_minmax'?)" in message   # the registry's part
    assert (f"plugin {str(tmp_path / 'script.py')!r} registered no scheme or distribution; it defines the "
            "scheme(s) 'plug_minmax' (MINE) without registering them") in message
    assert "inside a function such as main(), or under `if __name__ == '__main__':`" in message
    assert (f"plugin {str(tmp_path / 'plug.py')!r} registered scheme(s) ['plug_minmax'] and "
            "distribution(s) ['plug_shifted']") in message
    # an unknown distribution says the same; and the summary is plugin_summary's, the CLI's check
    with pytest.raises(ValueError, match=r"received 'mine'.*registered no scheme or distribution"):
        kvstats.SweepConfig.from_dict({"plugins": [str(tmp_path / "script.py")], "schemes": ["KQV"],
                                       "distributions": ["mine"]})
    assert plugins.plugin_summary([str(tmp_path / "plug.py")]) == [
        f"plugin {str(tmp_path / 'plug.py')!r} registered scheme(s) ['plug_minmax'] and distribution(s) "
        "['plug_shifted']"]
    # without plugins the message is the registry's alone
    with pytest.raises(ValueError) as err:
        kvstats.SweepConfig.from_dict({**base, "schemes": ["nope"]})
    assert "[sweep] plugins:" not in str(err.value)


def test_a_module_plugin_and_bad_entries(tmp_path, monkeypatch):
    (tmp_path / "my_plugin_mod.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = kvstats.SweepConfig.from_dict({"plugins": ["my_plugin_mod"], "schemes": ["plug_minmax"],
                                         "distributions": ["plug_shifted"]})
    assert cfg.plugins == ("my_plugin_mod",)
    assert plugins.plugin_records(cfg.plugins)[0]["kind"] == "module"
    with pytest.raises(plugins.PluginError, match=r"importing module 'no_such_mod' failed: ModuleNotFoundError"):
        kvstats.SweepConfig.from_dict({"plugins": ["no_such_mod"], "schemes": ["KQV"], "distributions": ["gaussian"]})
    with pytest.raises(TypeError, match=r"plugins must be a list of strings"):
        kvstats.SweepConfig.from_dict({"plugins": "my.py", "schemes": ["KQV"], "distributions": ["gaussian"]})
    with pytest.raises(plugins.PluginError, match="neither a .py file nor a module name"):
        kvstats.SweepConfig.from_dict({"plugins": ["not a module"], "schemes": ["KQV"], "distributions": ["gaussian"]})


@pytest.mark.parametrize("entry", ["file", "module"])
def test_a_plugin_the_script_imported_itself_is_not_imported_twice(tmp_path, monkeypatch, entry):
    # the script imports its plugin (to check its scheme, say), then names it in the config:
    # a second import would register its names again ("already registered"); its
    # registrations become the plugin's (workers import the plugin for them)
    import importlib

    (tmp_path / "my_plugin_mod.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("my_plugin_mod")
    assert register.user_schemes() == {"plug_minmax": None}      # the script's, so far
    ref = str(tmp_path / "my_plugin_mod.py") if entry == "file" else "my_plugin_mod"
    config = {"plugins": [ref], "schemes": ["plug_minmax"], "distributions": ["plug_shifted"],
              "budgets": [3], "dims": [16], "n_keys": [8], "n_trials": 4, "comparisons": []}
    result = kvstats.run_sweep(config, executor="serial", progress=False)
    code = result.manifest["user_code"]
    assert code["schemes"] == {"plug_minmax": ref} and code["distributions"] == {"plug_shifted": ref}
    assert code["plugins"][0]["module"] == "my_plugin_mod" and len(result.frame) == 4


def test_the_command_line_sweeps_and_reports_with_a_plugin(tmp_path, capsys):
    from kvstats.cli import main

    path = _config(tmp_path, trials=8, dists=['"gaussian"', '"heavy_tailed"'])
    out = tmp_path / "out"
    # the default pool (forkserver workers) imports the plugin in each worker
    assert main(["sweep", "--config", str(path), "--out", str(out), "--workers", "2", "--no-progress",
                 "--no-report"]) == 0
    # a fresh process would know nothing of the plugin: forget it here too
    registry._TABLE.pop("plug_minmax"), data_register._USER.pop("plug_shifted"), plugins._LOADED.clear()
    assert main(["report", str(out), "--no-figures"]) == 0
    report = (out / "report.md").read_text()
    assert "plug_minmax" in report and "heavy_tailed" in report


def test_the_report_of_a_user_distribution(tmp_path):
    path = _config(tmp_path, schemes=("KQV", "plug_minmax"))
    result = kvstats.run_sweep(path, executor="serial", progress=False)
    kvstats.hypothesis_report(result, tmp_path / "rep", figures=False, energy_resamples=19,
                              bootstrap_resamples=99)
    text = (tmp_path / "rep" / "report.md").read_text()
    # the header says the numbers came from user code, and from which file (its hash)
    sha = result.manifest["user_code"]["plugins"][0]["sha256"][:12]
    assert "User code (not part of kvstats" in text
    assert f"distribution plug_shifted: plugin {tmp_path / 'plug.py'} (SHA-256 {sha})" in text
    assert f"scheme plug_minmax: plugin {tmp_path / 'plug.py'} (SHA-256 {sha})" in text
    # no key spectrum is known for a user's distribution: value bounds only (Gaussian values)
    from kvstats.analysis.theory import case_spectra
    key, value = case_spectra("plug_shifted", "shift=2.0", 16, 32)
    assert key is None and value is not None and float(value.mean_square) == 16.0


# ------------------------------------------------------------------ resume and user code
def _forget_plugins():
    """What a new process would be: no plugin imported, no user registration."""
    for name in [n for n in registry._TABLE if n not in registry.BUILTIN]:
        del registry._TABLE[name]
        registry._ORIGIN.pop(name, None)
    data_register._USER.clear()
    data_register._DIST_ORIGIN.clear()
    plugins._LOADED.clear()
    plugin_relocation._RELOCATED.clear()
    for name in [n for n in sys.modules if n.startswith("kvstats_plugin_")]:
        del sys.modules[name]


def test_resume_recomputes_the_cells_of_edited_user_code(tmp_path, capsys):
    """An edited plugin changes the ids of the cells its code computes (so resume cannot
    reuse numbers the new code would not give); built-in cells on built-in data resume."""
    path = _config(tmp_path, schemes=("KQV", "plug_minmax"))
    out = tmp_path / "out"
    first = kvstats.run_sweep(path, out, executor="serial", progress=False)
    keys = {c["id"]: (c["key"]["scheme"], c["key"]["case"]["distribution"]) for c in first.manifest["cells"]}
    _forget_plugins()
    again = kvstats.run_sweep(path, out, executor="serial", progress=False)
    assert {c["status"] for c in again.manifest["cells"]} == {"resumed"}      # nothing changed
    _forget_plugins()
    plug = tmp_path / "plug.py"
    plug.write_text(plug.read_text().replace("side = n_tokens", "side = 1 * n_tokens"))
    edited = kvstats.run_sweep(path, out, executor="serial", progress=False)
    assert "computed by other versions of its user code" in capsys.readouterr().err
    status = {keys.get(c["id"], (c["key"]["scheme"], c["key"]["case"]["distribution"])): c["status"]
              for c in edited.manifest["cells"]}
    assert status[("KQV", "gaussian")] == "resumed"
    assert {s for (scheme, dist), s in status.items()
            if scheme == "plug_minmax" or dist == "plug_shifted"} == {"computed"}
    # an edit that changes no number: the same rows, under the new ids
    assert edited.frame.drop(columns="cell_id").equals(first.frame.drop(columns="cell_id"))


def test_user_code_digest_follows_the_source_file(tmp_path):
    from kvstats.sweep.plan import Cell, user_code_digest
    from kvstats.sweep import SchemeSpec

    path = tmp_path / "mod.py"
    path.write_text(PLUGIN.replace("plug_", "digest_"))
    plugins.load_plugins([str(path)])
    cell = Cell("gaussian", {}, 16, 32, 3, SchemeSpec("digest_minmax"))
    data_cell = Cell("digest_shifted", {"shift": 1.0}, 16, 32, 3, SchemeSpec("KQV"))
    first = user_code_digest(cell), user_code_digest(data_cell)
    assert None not in first and user_code_digest(Cell("gaussian", {}, 16, 32, 3, SchemeSpec("KQV"))) is None
    path.write_text(path.read_text() + "\n# edited\n")
    assert user_code_digest(cell) != first[0] and user_code_digest(data_cell) != first[1]


@pytest.mark.parametrize("name, hint", [("gaussian", True), ("real", True), ("nope", False)])
def test_unregistering_a_built_in_distribution_says_it_cannot_be(name, hint):
    # as unregister_scheme("KQV") says; a review found the distribution's message without it
    with pytest.raises(ValueError, match="must be a registered distribution") as err:
        data_register.unregister_distribution(name)
    assert ("a built-in cannot be unregistered" in str(err.value)) == hint
