"""``kvstats report`` of a sweep whose scheme or distribution a script registered (no
plugin recorded): the error says that the command cannot import it and names the Python
call that can report it."""

import pytest

import kvstats
from kvstats.cli import main
from kvstats.data.register import registered_distribution
from kvstats.quant.register import registered_scheme
from kvstats.quant.uniform import UniformTokenCoder

pytestmark = pytest.mark.usefixtures("user_registries")


def _build(bits, dim, params, key_rng, value_rng, draws):
    return bits, UniformTokenCoder(bits, dim, dim), UniformTokenCoder(bits, dim, dim)


def _bits(bits, dim, n_tokens, params):
    return (n_tokens * (bits * dim + 2 * 16),) * 2


def _sampler(n_trials, n_keys, dim, rng, params):
    return rng.standard_normal((n_trials, n_keys, dim))


@pytest.mark.parametrize("own", ["scheme", "distribution"])
def test_reporting_a_script_registered_sweep_names_the_python_call(tmp_path, capsys, own):
    out = tmp_path / "nb"
    grid = {"schemes": ["tok", "KQV"] if own == "scheme" else ["KQV"], "budgets": [3],
            "distributions": ["mine"] if own == "distribution" else ["gaussian"], "dims": [16],
            "n_keys": [8], "n_trials": 4, "comparisons": []}
    registered = (registered_scheme(kvstats.define_scheme("tok", _build, _bits, summary="x"))
                  if own == "scheme" else registered_distribution("mine", _sampler))
    with registered:
        kvstats.run_sweep(grid, out=out, executor="serial", progress=False)
    assert main(["report", str(out), "--no-figures", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "of your own must be registered in this process first" in err
    assert err.rstrip().endswith(
        "the kvstats command imports only the plugins the sweep's config named: a sweep of a "
        "scheme or distribution a script registered is reported from Python, with "
        f"kvstats.hypothesis_report({str(out)!r}, OUT) in a script that registers it first (or "
        "register it in a plugin file named in [sweep] plugins, and sweep again)"), err
