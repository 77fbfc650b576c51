"""The [report] option schema: every bad option is one ValueError/TypeError line naming the key."""

import pytest

from kvstats.report.options import REPORT_OPTIONS, report_options_markdown, validate_report_options

BAD = [  # (options, exception, words the one-line message must contain)
    ({"alpha": 1.5}, ValueError, ["'alpha'", "(0, 1)", "1.5"]),
    ({"alpha": 0}, ValueError, ["'alpha'", "(0, 1)", "0"]),
    ({"alpha": "0.05"}, TypeError, ["'alpha'", "'0.05'"]),
    ({"alpha": True}, TypeError, ["'alpha'", "True"]),
    ({"correction": "holmes"}, ValueError, ["'correction'", "'holm'", "'holmes'", "did you mean 'holm'"]),
    # the FDR procedures by their initials: too far from 'fdr_bh' for a near-miss match
    ({"correction": "bh"}, ValueError, ["'correction'", "'bh'", "did you mean 'fdr_bh'"]),
    ({"correction": "BY"}, ValueError, ["'correction'", "'BY'", "did you mean 'fdr_by'"]),
    ({"energy_resamples": 0}, ValueError, ["'energy_resamples'", ">= 1", "0"]),
    ({"energy_resamples": 4.5}, TypeError, ["'energy_resamples'", "4.5"]),
    ({"energy_resolution": "fam"}, ValueError, ["'energy_resolution'", "'family'", "'fam'"]),
    ({"energy_stop": -1}, ValueError, ["'energy_stop'", "-1"]),
    ({"bootstrap_resamples": 0}, ValueError, ["'bootstrap_resamples'", "0"]),
    ({"confidence": 95}, ValueError, ["'confidence'", "(0, 1)", "95"]),
    ({"seed": -3}, ValueError, ["'seed'", ">= 0", "-3"]),
    ({"figures": "yes"}, TypeError, ["'figures'", "true or false", "'yes'"]),
    ({"energy": "false"}, TypeError, ["'energy'", "true or false", "'false'"]),   # a TOML string
    ({"equivalence": 0.1}, TypeError, ["'equivalence'", "metric = margin", "0.1"]),
    ({"equivalence": {"recall_at5": 0.1}}, ValueError, ["'equivalence'", "'recall_at5'",
                                               "did you mean 'recall_at_5'"]),
    ({"equivalence": {"kl": -0.1}}, ValueError, ["'equivalence.kl'", "> 0", "-0.1"]),
    ({"equivalence": {"kl": 0.6}, "equivalence_test": "rank"}, ValueError,
     ["'equivalence.kl'", "(0, 0.5)", "0.6"]),
    ({"equivalence": {"snr_k": 0.1}}, ValueError, ["'equivalence.snr_k'", "dB", "rank"]),
    ({"equivalence_test": "tost"}, ValueError, ["'equivalence_test'", "'ratio'", "'tost'"]),
    ({"unit": "text"}, ValueError, ["'unit'", "'cluster'", "'text'"]),
    ({"comparisons": [["KV"]]}, TypeError, ["comparisons must be", "pairs"]),
    ({"corection": "holm"}, ValueError, ["unknown report option 'corection'", "did you mean 'correction'",
                                         "allowed: alpha"]),
    ({"xyzzy": 1}, ValueError, ["unknown report option 'xyzzy'", "allowed:"]),
    # the edges of each range: open ends excluded, NaN and bools refused
    ({"alpha": 1.0}, ValueError, ["'alpha'", "(0, 1)", "1.0"]),
    ({"alpha": float("nan")}, ValueError, ["'alpha'", "(0, 1)", "nan"]),
    ({"confidence": 1}, ValueError, ["'confidence'", "(0, 1)", "1"]),
    ({"energy_resamples": True}, TypeError, ["'energy_resamples'", "True"]),
    ({"figures": 1}, TypeError, ["'figures'", "true or false", "1"]),
    ({"equivalence": {"kl": 0}}, ValueError, ["'equivalence.kl'", "> 0", "0"]),
    ({"equivalence": {"kl": 0.5}, "equivalence_test": "rank"}, ValueError,
     ["'equivalence.kl'", "(0, 0.5)", "0.5"]),
    ({"comparisons": [["KV", "KQV", "QKQV"]]}, TypeError, ["comparisons must be", "pairs"]),
]


@pytest.mark.parametrize("options, exc, words", BAD, ids=[repr(b[0])[:40] for b in BAD])
def test_bad_option_is_one_line_naming_the_key(options, exc, words):
    with pytest.raises(exc) as info:
        validate_report_options(options)
    msg = str(info.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, (w, msg)


def test_defaults_and_normalisation():
    opts = validate_report_options(None)
    assert set(opts) == {o.name for o in REPORT_OPTIONS}
    assert opts["alpha"] == 0.05 and opts["correction"] == "holm" and opts["equivalence"] == {}
    assert opts["energy_resolution"] == "family" and opts["unit"] == "auto"
    opts = validate_report_options({"alpha": 0.01, "equivalence": {"kl": 1, "recall_at_5": 0.02},
                                    "comparisons": [["a", "b"]], "seed": None})
    assert opts["alpha"] == 0.01 and opts["seed"] == 0
    assert opts["equivalence"] == {"kl": 1.0, "recall_at_5": 0.02}
    assert opts["comparisons"] == (("a", "b"),)
    # the closed ends of the ranges are allowed
    edge = validate_report_options({"energy_resamples": 1, "energy_stop": 1, "bootstrap_resamples": 40,
                                    "seed": 0, "equivalence": {"kl": 0.49},
                                    "equivalence_test": "rank"})
    assert (edge["energy_resamples"], edge["energy_stop"], edge["bootstrap_resamples"],
            edge["seed"]) == (1, 1, 40, 0)   # 40: min_resamples(0.95)
    # the default table is never shared between calls
    validate_report_options({})["equivalence"]["kl"] = 1.0
    assert validate_report_options({})["equivalence"] == {}


def test_rank_margins_allow_db_metrics():
    opts = validate_report_options({"equivalence": {"snr_k": 0.1}, "equivalence_test": "rank"})
    assert opts["equivalence"] == {"snr_k": 0.1}


def test_markdown_lists_every_option():
    md = report_options_markdown()
    for o in REPORT_OPTIONS:
        assert f"`{o.name}`" in md


def test_options_module_does_not_import_matplotlib():
    import subprocess
    import sys
    code = ("import sys, kvstats.report.options; "
            "print('matplotlib' in sys.modules, 'kvstats.analysis' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_the_docs_tables_are_the_generated_one():
    # docs/usage.md and docs/statistics.md print the option table; a changed default or
    # description must reach both (regenerate with report_options_markdown())
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    md = report_options_markdown()
    for doc in ("docs/usage.md", "docs/statistics.md"):
        text = (root / doc).read_text()
        assert md in text, f"{doc}: its option table differs from report_options_markdown()"
