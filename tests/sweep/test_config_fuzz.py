"""Config fuzz: typos, wrong types, out-of-range values, duplicates and bad files.

Every case must fail *before any compute* (no task runs, the output folder is not even
created) with exit status 2 and one line that names the key and what was received.
"""

import pytest

from kvstats.cli import main
from kvstats.sweep import SweepConfig, load_config, run

BASE = """\
[sweep]
seed = 3
budgets = [2, 3]
dims = [16]
n_keys = [8]
n_trials = 4

[[schemes]]
name = "KQV"

[[schemes]]
name = "QKQV"

[[distributions]]
name = "heavy_tailed"
params = {nu = 3.0}

[report]
comparisons = [["KQV", "QKQV"]]
alpha = 0.05
"""

HT = 'name = "heavy_tailed"\nparams = {nu = 3.0}'

# (case id, text replaced, replacement, what the one-line message must contain)
CASES = [
    # typos
    ("key typo", "n_trials = 4", "n_trails = 4",
     "unknown config key(s) ['n_trails'] (did you mean 'n_trials'?)"),
    ("table typo", "[report]", "[reports]", "unknown config key(s) ['reports'] (did you mean 'report'?)"),
    ("sweep table typo", "[sweep]", "[sweeps]", "unknown config key(s) ['sweeps'] (did you mean 'sweep'?)"),
    ("report option among the sweep's keys", "n_trials = 4", "n_trials = 4\ncorrection = \"holm\"",
     "unknown config key(s) ['correction'] (['correction'] is a [report] option: put it under a [report] table)"),
    ("scheme typo", 'name = "QKQV"', 'name = "QKVQ"', "received 'QKVQ' (did you mean 'QKQV'?)"),
    ("mixed precision out of range", 'name = "QKQV"', 'name = "K9V2"',
     "received 'K9V2' (mixed precision K{a}V{b} takes a and b in 1..8)"),
    ("distribution typo", 'name = "heavy_tailed"', 'name = "heavy_taled"', "did you mean 'heavy_tailed'"),
    ("report key typo", "alpha = 0.05", "alpah = 0.05",
     "unknown report option 'alpah' (did you mean 'alpha'?)"),
    ("comparison label typo", '[["KQV", "QKQV"]]', '[["KQV", "QKVQ"]]',
     "received 'QKVQ' (did you mean 'QKQV'?)"),
    ("correction typo", "alpha = 0.05", 'correction = "holmes"', "report option 'correction' must be one of"),
    ("distribution param typo", "{nu = 3.0}", "{nu = 3.0, sclae = 2.0}",
     "['sclae'] not accepted by distribution 'heavy_tailed'"),
    ("scheme param typo", 'name = "KQV"\n', 'name = "KQV"\nlabel = "KQV"\nparams = {norm_dtyp = "float32"}\n',
     "unknown parameter(s) ['norm_dtyp']"),
    # wrong types
    # (a wrong type gives the allowed range too: it said only "must be an integer")
    ("n_trials text", "n_trials = 4", 'n_trials = "4"', "n_trials must be an integer in [2, inf]; received '4'"),
    ("budgets text", "budgets = [2, 3]", 'budgets = "2"', "budgets must be an integer in [1, 8]; received '2'"),
    ("budgets float", "budgets = [2, 3]", "budgets = [2.5]", "budgets must be an integer in [1, 8]; received 2.5"),
    ("dims float", "dims = [16]", "dims = [16.0]", "dims must be an integer in [2, inf]; received 16.0"),
    ("seed bool", "seed = 3", "seed = true", "seed must be an integer in [0, inf]; received True"),
    ("n_queries float", "n_trials = 4", "n_trials = 4\nn_queries = 1.5",
     "n_queries must be an integer in [1, inf]; received 1.5"),
    ("chunk_size float", "n_trials = 4", "n_trials = 4\nchunk_size = 2.5",
     "chunk_size must be an integer in [1, inf]; received 2.5 (or leave it out"),
    ("generator text", "n_trials = 4", 'n_trials = 4\ngenerator = "2"',
     "generator must be one of [1, 2]; received '2'"),
    ("dtype int", "n_trials = 4", "n_trials = 4\ndtype = 64",
     "dtype must be one of ['float64', 'float32']; received 64"),
    ("alpha text", "alpha = 0.05", 'alpha = "0.05"',
     "report option 'alpha' must be a float in (0, 1); received '0.05'"),
    ("figures text", "alpha = 0.05", 'figures = "no"',
     "report option 'figures' must be true or false; received 'no'"),
    ("comparisons text", 'comparisons = [["KQV", "QKQV"]]', 'comparisons = "KQV"',
     "comparisons must be a list of (scheme_a, scheme_b) pairs, e.g. [('KQV', 'QKQV')] (in a TOML config: comparisons = [[\"KQV\", \"QKQV\"]]); received 'KQV'"),
    ("comparisons one flat pair", 'comparisons = [["KQV", "QKQV"]]', 'comparisons = ["KQV", "QKQV"]',
     "(in a TOML config: comparisons = [[\"KQV\", \"QKQV\"]]); received the item 'KQV' of ['KQV', 'QKQV']"),
    # what the sweep sets itself: make_scheme would say "got multiple values for argument 'bits'"
    ("scheme param bits", 'name = "KQV"\n', 'name = "KQV"\nlabel = "KQV"\nparams = {bits = 3, seed = 1}\n',
     "scheme 'KQV' params must not set ['bits', 'seed']: the sweep sets bits (from 'budgets')"),
    ("scheme param dim", 'name = "KQV"\n', 'name = "KQV"\nlabel = "KQV"\nparams = {dim = 16}\n',
     "params must not set ['dim']: the sweep sets dim (from 'dims')"),
    # (which entry's params: with several schemes or distributions, "params" alone names none)
    ("distribution params not a table", "params = {nu = 3.0}", "params = 3",
     "distribution 'heavy_tailed' params must be a table/dict of parameters; received 3"),
    ("distribution param a list", "{nu = 3.0}", "{nu = [3.0]}",
     "distribution 'heavy_tailed' params['nu'] must be a number, string or boolean; received [3.0]"),
    ("scheme params not a table", 'name = "KQV"\n', 'name = "KQV"\nlabel = "KQV"\nparams = 3\n',
     "scheme 'KQV' params must be a table/dict of parameters; received 3"),
    ("distribution params empty list", "params = {nu = 3.0}", "params = []",
     "distribution 'heavy_tailed' params must be a table or a non-empty list of tables (one case each); "
     "received []"),
    # TOML puts a key below a [[...]] header into that entry: the message says so
    ("sweep key below a table header", "params = {nu = 3.0}", "params = {nu = 3.0}\nn_queries = 2",
     "unknown key(s) ['n_queries'] (['n_queries'] is a sweep setting: in TOML a key written below a "
     "[[schemes]] or [[distributions]] header belongs to that entry"),
    # out of range
    ("budget 9", "budgets = [2, 3]", "budgets = [2, 9]", "budgets must be an integer in [1, 8]; received 9"),
    ("scheme budgets below the scheme's range", 'name = "QKQV"\n', 'name = "QKQV"\nbudgets = [1, 2]\n',
     "scheme 'QKQV' budgets must be an integer in [2, 8]; received 1"),
    ("n_keys below k", "n_keys = [8]", "n_keys = [3]",
     "n_keys must be an integer in [5, inf]; received 3 (recall@5"),
    ("n_trials 1", "n_trials = 4", "n_trials = 1", "n_trials must be an integer in [2, inf]; received 1"),
    ("dims 1", "dims = [16]", "dims = [1]", "dims must be an integer in [2, inf]; received 1"),
    ("nu just above 1", "nu = 3.0", "nu = 1.0001", "param nu must be a finite number >= 1.05"),
    ("nu 0", "nu = 3.0", "nu = 0", "param nu must be a finite number >= 1.05"),
    ("alpha 1.5", "alpha = 0.05", "alpha = 1.5",
     "report option 'alpha' must be a float in (0, 1); received 1.5"),
    ("energy_resamples 0", "alpha = 0.05", "energy_resamples = 0",
     "report option 'energy_resamples' must be an int >= 1"),
    ("chunk_size 0", "n_trials = 4", "n_trials = 4\nchunk_size = 0",
     "chunk_size must be an integer in [1, inf]; received 0"),
    ("low_rank rank > d", HT, 'name = "low_rank"\nparams = {rank = 40}',
     "distribution 'low_rank' params rank=40 at d=16, N=8: rank must be an integer in [1, 16]; received 40"),
    ("focused n_focus > N", HT, 'name = "focused"\nparams = {n_focus = 9}',
     "distribution 'focused' params n_focus=9"),
    ("scheme param value", 'name = "KQV"\n', 'name = "KQV"\nlabel = "KQV"\nparams = {norm_dtype = "float8"}\n',
     "scheme 'KQV' at n=2, d=16:"),
    ("comparison of an unlabelled scheme with params", 'name = "KQV"\n',
     'name = "KQV"\nparams = {norm_dtype = "float32"}\n',
     "comparisons label must be one of [\"KQV[norm_dtype='float32']\", 'QKQV']; received 'KQV'"),
    # duplicates
    ("seed top level and [sweep]", "[sweep]", "seed = 4\n[sweep]",
     "['seed'] given both at the top level and in [sweep]"),
    ("duplicate scheme", '[[distributions]]', '[[schemes]]\nname = "KQV"\n\n[[distributions]]',
     "schemes must have distinct labels; received duplicates ['KQV']"),
    ("comparisons twice", "[sweep]", '[sweep]\ncomparisons = [["QKQV", "KQV"]]',
     "comparisons given both in [report] and elsewhere"),
    ("duplicate distribution", "[report]", f"[[distributions]]\n{HT}\n\n[report]",
     "distributions must not repeat a (name, params) pair"),
    ("comparison of a scheme with itself", '[["KQV", "QKQV"]]', '[["KQV", "KQV"]]',
     "comparisons must pair two different scheme labels; received ['KQV', 'KQV']"),
    ("comparison repeated the other way round", '[["KQV", "QKQV"]]', '[["KQV", "QKQV"], ["QKQV", "KQV"]]',
     "comparisons must not repeat a pair, either way round"),
    ("duplicate budget", "budgets = [2, 3]", "budgets = [3, 3]", "budgets must not repeat values; received [3, 3]"),
    ("duplicate n_keys", "n_keys = [8]", "n_keys = [8, 8]", "n_keys must not repeat values; received [8, 8]"),
]


@pytest.fixture
def no_compute(monkeypatch):
    def forbidden(task, emit=None):
        raise AssertionError("a task ran although the config is bad")

    monkeypatch.setattr(run, "_compute_task", forbidden)


def _run(config, out, capsys):
    code = main(["sweep", "--config", str(config), "--out", str(out), "--workers", "1", "--no-progress"])
    err = capsys.readouterr().err
    return code, err


def test_the_base_config_is_valid(tmp_path, capsys):
    from kvstats.sweep import check_grid

    (tmp_path / "c.toml").write_text(BASE)
    assert len(check_grid(tmp_path / "c.toml")) == 4
    # the edge of the heavy-tailed range is inside it (the check is nu >= 1.05, not >)
    (tmp_path / "c.toml").write_text(BASE.replace("nu = 3.0", "nu = 1.05"))
    assert len(check_grid(tmp_path / "c.toml")) == 4


@pytest.mark.parametrize("case, old, new, message", CASES, ids=[c[0] for c in CASES])
def test_bad_config_fails_before_compute_with_one_line(tmp_path, capsys, no_compute, case, old, new, message):
    assert BASE.count(old) >= 1, case
    config = tmp_path / "c.toml"
    config.write_text(BASE.replace(old, new, 1))
    out = tmp_path / "out"
    code, err = _run(config, out, capsys)
    assert code == 2, (case, err)
    assert err.startswith("kvstats sweep: error: ") and err.count("\n") == 1, err
    assert message in err, err
    assert not out.exists()  # nothing written, not even the folder


@pytest.mark.parametrize("what, message", [
    ("directory", "is a directory; give a TOML file"),
    ("missing", "does not exist"),
    ("not toml", "is not valid TOML"),
    ("not utf-8", "is not UTF-8 text"),
])
def test_bad_config_files(tmp_path, capsys, no_compute, what, message):
    config = tmp_path / "c.toml"
    if what == "directory":
        config.mkdir()
    elif what == "not toml":
        config.write_text(BASE[:-10])
    elif what == "not utf-8":
        config.write_bytes(BASE.encode() + b"\n# \xff\xfe\n")
    code, err = _run(config, tmp_path / "out", capsys)
    assert code == 2 and message in err and err.count("\n") == 1, err


@pytest.mark.parametrize("text, message", [
    ("", "config must define 'schemes'; received keys []"),
    ('[sweep]\nseed = 3\n[[distributions]]\nname = "gaussian"\n',
     "config must define 'schemes'; received keys ['distributions', 'seed']"),
    # a top-level key written below a [[schemes]] header is that entry's
    ('[[schemes]]\nname = "KQV"\ndistributions = ["gaussian"]\n',
     "config must define 'distributions'; received keys ['schemes'] (a [[schemes]] entry holds "
     "'distributions': in TOML a key written below"),
])
def test_an_incomplete_config_shows_the_smallest_one(tmp_path, capsys, no_compute, text, message):
    config = tmp_path / "c.toml"
    config.write_text(text)
    code, err = _run(config, tmp_path / "out", capsys)
    assert code == 2 and err.count("\n") == 1 and message in err, err
    smallest = 'schemes = ["KQV"] and distributions = ["gaussian"] (TOML: two lines above any [table])'
    assert f"; the smallest config: {smallest}" in err, err
    # which is a valid config as written
    config.write_text('schemes = ["KQV"]\ndistributions = ["gaussian"]\n')
    cfg = load_config(config)
    assert [s.name for s in cfg.schemes] == ["KQV"] and [d.name for d in cfg.distributions] == ["gaussian"]


@pytest.mark.parametrize("nu", [1.0001, 0, -2.5, float("inf"), float("nan"), True, "3"])
def test_the_config_refuses_nu_with_the_samplers_own_rule(nu):
    """nu's range does not depend on (d, N), so the config refuses it when read, before the
    grid's first draw; with the sampler's own check and message (one rule, not a copy),
    the error's type included (a string or a bool is a TypeError, a number out of range a
    ValueError)."""
    from kvstats.data.synthetic import sample

    with pytest.raises((ValueError, TypeError)) as by_sample:
        sample("heavy_tailed", 1, 8, 4, nu=nu)
    with pytest.raises(type(by_sample.value)) as by_config:
        SweepConfig.from_dict({"schemes": ["KQV"], "distributions": [
            {"name": "heavy_tailed", "params": [{"nu": 3.0}, {"nu": nu}]}]})
    assert str(by_config.value) == f"distribution 'heavy_tailed' param {by_sample.value}"
    # in range: taken, as the sampler takes it
    SweepConfig.from_dict({"schemes": ["KQV"], "distributions": [{"name": "heavy_tailed",
                                                                   "params": {"nu": 1.05}}]})
