"""A pair of schemes with no budget to be compared at is said, not dropped without a word
(new-user referee, finding 1), and the report's wording around pairs (findings 2-4).

The referee's equal-storage sweep (TQ at budgets [3, 4] against kivi at [1, 2], both named
in ``[report] comparisons``) lost its central pair from comparisons.csv and report.md with
no warning; the obvious fix (turboquant_mse twice, TQ3 at [3] and TQ4 at [4]) was refused.
The default pairs' warning suggested a command that a shell mangles
(``KQV[norm_dtype='float32']``) and was printed by ``kvstats report --comparison``, which
had named its pairs; a misspelt scheme parameter first gave that warning and then an error
without a suggestion; 60 energy rows at p adj = 0.033 read as evidence, not as the floor
their B sets; and a pair across budgets sat under a heading naming one scheme's n only.
"""

import shlex
import warnings

import pytest

import kvstats
from kvstats.analysis import compare_schemes
from kvstats.cli import _pairs_flag, main
from kvstats.sweep import SweepConfig

from _pair_configs import GRID, TWO_POINTS, _warned

DISJOINT = {**GRID, "budgets": [3, 4],
            "schemes": [{"name": "turboquant_mse", "label": "TQ", "budgets": [3, 4]},
                        {"name": "kivi", "budgets": [1, 2]}, {"name": "KQV", "budgets": [3, 4]}],
            "comparisons": [["TQ", "kivi"], ["TQ", "KQV"]]}


@pytest.fixture(scope="module")
def disjoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("disjoint") / "sweep"
    res, said = _warned(lambda: kvstats.run_sweep(DISJOINT, out=out, executor="serial", progress=False))
    return res, out, said


def test_the_config_warns_once_naming_the_pair_and_the_rule():
    _, said = _warned(lambda: SweepConfig.from_dict(DISJOINT))
    pairs = [m for m in said if m.startswith("no comparison of")]
    assert len(pairs) == 1, said
    assert pairs[0].startswith("no comparison of TQ and kivi: TQ runs at n = 3, 4 and kivi at n = 1, 2, "
                               "no budget in common")
    assert "across budgets only when each of the two ran at a single one" in pairs[0]
    assert "TQ3 at [3] and TQ4 at [4]" in pairs[0]   # the way to two operating points
    # said when the config is read, before any report (also under --no-report): no claim
    # that a Summary names it now, only that a report of these results will
    assert "(a report of these results names it under Not compared)" in pairs[0]
    # the comparable pair (TQ and KQV share 3 and 4) is not warned of
    assert not any("TQ and KQV" in m for m in said)


def test_compare_schemes_warns_and_gives_the_pair_no_row(disjoint):
    res, _, _ = disjoint
    table, said = _warned(lambda: compare_schemes(res.frame, [("TQ", "kivi"), ("TQ", "KQV")], energy=False))
    assert [m for m in said if m.startswith("no comparison of TQ and kivi")] != []
    assert set(zip(table["scheme_a"], table["scheme_b"])) == {("TQ", "KQV")}
    table, said = _warned(lambda: compare_schemes(res.frame, [("TQ", "kivi")], energy=False))
    assert table.empty and len([m for m in said if m.startswith("no comparison of TQ and kivi")]) == 1


def test_the_report_names_the_pair_not_compared_and_warns_once_per_action(disjoint, tmp_path):
    res, out, said = disjoint
    assert len([m for m in said if m.startswith("no comparison of TQ and kivi")]) == 1   # run_sweep's config
    # the report of the result the config warned of: no second warning, the Summary names it
    rep, said = _warned(lambda: kvstats.hypothesis_report(res, tmp_path / "a"))
    assert not [m for m in said if m.startswith("no comparison")], said
    md = rep.files["markdown"].read_text()
    summary = md.split("## Summary", 1)[1].split("\n## ", 1)[0]
    assert ("**Not compared** (asked for): TQ vs kivi (TQ at n = 3, 4; kivi at n = 1, 2): no budget "
            "in common") in summary
    assert set(zip(rep.comparisons["scheme_a"], rep.comparisons["scheme_b"])) == {("TQ", "KQV")}
    # from the folder: the config read again warns once; the pairs given instead: theirs only
    _, said = _warned(lambda: kvstats.hypothesis_report(out, tmp_path / "b"))
    assert len([m for m in said if m.startswith("no comparison of TQ and kivi")]) == 1
    _, said = _warned(lambda: kvstats.hypothesis_report(out, tmp_path / "c", comparisons=[("TQ", "KQV")]))
    assert not [m for m in said if m.startswith("no comparison")], said


def test_a_fixed_budget_scheme_the_config_cannot_place_is_warned_of_by_the_report(tmp_path):
    cfg = {**GRID, "budgets": [2, 4], "schemes": ["KQV", "K4V2"], "comparisons": [["KQV", "K4V2"]]}
    res, said = _warned(lambda: kvstats.run_sweep(cfg, out=tmp_path / "s", executor="serial", progress=False))
    assert not [m for m in said if m.startswith("no comparison")]   # K4V2's n = 3 is known once run
    rep, said = _warned(lambda: kvstats.hypothesis_report(res, tmp_path / "r"))
    assert [m for m in said if m.startswith("no comparison of KQV and K4V2: KQV runs at n = 2, 4 and "
                                            "K4V2 at n = 3")] != [], said
    assert "**Not compared** (asked for): KQV vs K4V2" in rep.files["markdown"].read_text()


def test_two_labelled_entries_of_one_scheme_at_disjoint_budgets_are_two_operating_points(tmp_path):
    res, said = _warned(lambda: kvstats.run_sweep(TWO_POINTS, out=tmp_path / "s", executor="serial",
                                                  progress=False))
    assert not [m for m in said if m.startswith("no comparison")]
    rep = kvstats.hypothesis_report(res, tmp_path / "r")
    comp = rep.comparisons
    assert set(zip(comp["scheme_a"], comp["budget"], comp["scheme_b"], comp["budget_b"])) == {
        ("TQ3", 3.0, "kivi1", 1.0), ("TQ4", 4.0, "kivi2", 2.0)}
    md = rep.files["markdown"].read_text()
    # a pair across budgets under a heading naming both n (finding 4)
    assert "### gaussian, d = 16, N = 8: TQ3 at n = 3 vs kivi1 at n = 1\n" in md
    assert "### gaussian, d = 16, N = 8: TQ4 at n = 4 vs kivi2 at n = 2\n" in md


@pytest.mark.parametrize("second, advice", [
    ({"label": "TQ4", "budgets": [3, 4]}, "give the two"),   # a budget shared (both labelled: referee C, F7)
    ({"budgets": [4]}, "give each a label and the two")])    # no label of its own
def test_one_scheme_twice_is_still_refused_at_a_shared_budget_or_unlabelled(second, advice):
    first = {"name": "turboquant_mse", "label": "TQ3", "budgets": [3]}
    with pytest.raises(ValueError, match=f"are the same scheme .*or {advice} "
                                         r"disjoint budgets \(two operating points\)"):
        SweepConfig.from_dict({**GRID, "budgets": [3], "comparisons": [],
                               "schemes": [first, {"name": "turboquant_mse", **second}]})


LABEL_PARAM = {**GRID, "budgets": [3], "schemes": [{"name": "KQV", "params": {"norm_dtype": "float32"}}, "QKQV"]}


def test_the_default_pairs_warning_quotes_its_command_for_a_shell():
    _, said = _warned(lambda: SweepConfig.from_dict(LABEL_PARAM))
    (msg,) = [m for m in said if m.startswith("no comparison: none of the default pairs")]
    command = msg.split("`")[1]
    argv = shlex.split(command)          # as a shell hands it to kvstats
    assert argv[:4] == ["kvstats", "report", "DIR", "--comparison"]
    labels = ["KQV[norm_dtype='float32']", "QKQV"]
    assert _pairs_flag([argv[4]], labels) == [tuple(labels)]
    # the durable fix: a label the default pairs name
    assert 'give the [[schemes]] entry of KQV[norm_dtype=\'float32\'] label = "KQV"' in msg


def test_kvstats_report_with_comparison_does_not_repeat_the_default_pairs_warning(tmp_path, capsys):
    _warned(lambda: kvstats.run_sweep(LABEL_PARAM, out=tmp_path / "s", executor="serial", progress=False))
    quiet = ["--no-figures", "--no-progress"]
    assert main(["report", str(tmp_path / "s"), "--out", str(tmp_path / "a"), *quiet]) == 0
    assert "warning: no comparison: none of the default pairs" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "s"), "--out", str(tmp_path / "b"), *quiet,
                 "--comparison", "KQV[norm_dtype='float32']:QKQV"]) == 0
    assert "warning: no comparison" not in capsys.readouterr().err


def test_a_misspelt_scheme_param_is_one_error_with_a_suggestion_and_no_warning_first():
    cfg = {**LABEL_PARAM, "schemes": [{"name": "KQV", "params": {"norm_dtyp": "float32"}}, "QKQV"]}
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        with pytest.raises(ValueError) as exc:
            SweepConfig.from_dict(cfg)
    assert rec == []
    assert str(exc.value) == ("scheme 'KQV' params: unknown parameter(s) ['norm_dtyp'] (did you mean "
                              "'norm_dtype'?); allowed: ['m', 'norm_dtype', 'rotation', 'sketch']")
    with pytest.raises(ValueError, match=r"\['norm_dtyp'\] for scheme 'KQV' \(did you mean 'norm_dtype'\?\)"):
        kvstats.make_scheme("KQV", 3, 16, norm_dtyp="float32")


def test_energy_p_values_at_their_floor_are_said_to_be_the_floor(tmp_path):
    # KV and KQV at n = 2 on 24 trials (too many pairs for the exact test): no permutation of B = 19 reaches the data
    cfg = {**GRID, "budgets": [2], "n_trials": 24, "schemes": ["KV", "KQV"], "comparisons": [["KV", "KQV"]],
           "report": {**GRID["report"], "energy_resolution": "fixed"}}
    res = kvstats.run_sweep(cfg, out=tmp_path / "s", executor="serial", progress=False)
    rep = kvstats.hypothesis_report(res, tmp_path / "r")
    energy = rep.comparisons[rep.comparisons["test"] == "energy"]
    assert len(energy) == 1 and energy["pvalue"].iloc[0] == pytest.approx(1 / 20)
    md = rep.files["markdown"].read_text()
    assert "(B = 19/19, at the floor)" in md
    summary = md.split("## Summary", 1)[1].split("\n## ", 1)[0]
    assert ("1 of 1 drawn permutation tests at the floor of their p (marked \"at the floor\"): no permutation "
            "of the B = 19 drawn reached the observed statistic, so p = 1/(1 + B)") in summary
    # B = 19 over this family cannot reach alpha: at the floor, not resolvable (referee C, F1)
    assert "1 at the floor and not resolvable: B = 19 cannot reach α = 0.05 in this family" in summary
    assert "only energy_resamples above 19 lowers it" in summary


def test_the_usage_recipe_for_two_operating_points_is_a_config_whose_pairs_are_compared():
    import re
    import tomllib
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "usage.md").read_text()
    section = text[text.index("**Which budgets a pair is compared at.**"):text.index("### Paired and two-sample tests")]
    raw = tomllib.loads(re.search(r"```toml\n(.*?)```", section, re.S).group(1))
    cfg, said = _warned(lambda: SweepConfig.from_dict({**GRID, **raw}))
    assert said == [] and cfg.comparisons == (("TQ3", "kivi1"), ("TQ4", "kivi2"))
    assert ("no comparison of TQ and kivi: TQ runs at n = 3, 4 and kivi at n = 1, 2, no budget in common"
            in " ".join(section.split()))   # the warning as it reads
