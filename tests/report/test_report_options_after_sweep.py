"""Options given after the sweep (the command's flags, hypothesis_report's keywords) are
not the config's declaration: the report names each one that differs from the ``[report]``
table the sweep recorded, with both values, in the Methods and the Summary's family line,
and records them in report.json; options equal to the declared ones read as declared."""

import json

from kvstats.report import hypothesis_report

from _sweep_frames import make_frame
from _sweep_frames import sweep_result as _result

SPEC = {("KQV", 2): 0.0, ("QKQV", 2): 0.4, ("KQV", 3): 0.0, ("QKQV", 3): 0.0}
# the options of a primary endpoint, and a fast report's resamples
PRIMARY = {"metrics": ["kl"], "energy": False, "correction": "fdr_bh"}
DECLARED = {"energy_resamples": 19, **PRIMARY}


def _line(md, start):
    return next((x for x in md.splitlines() if x.startswith(start)), None)


def test_a_family_chosen_after_the_sweep_says_so_with_the_declared_values(tmp_path):
    """Before: `kvstats report DIR --metrics kl --no-energy --correction fdr_bh` on a sweep
    whose config declared none of them printed "Family (the [report] options metrics and
    energy = false)", as if the config had declared that family."""
    f = make_frame(SPEC, n=20, seed=81)
    rep = hypothesis_report(_result(f, report={"energy_resamples": 19}), tmp_path / "r",
                            figures=False, **PRIMARY)
    md = rep.files["markdown"].read_text()
    methods = md.split("## Methods")[1]
    line = _line(methods, "- Set after the sweep, on the command line or in the call")
    assert line is not None, methods[:2000]
    for said in ("correction = fdr_bh (declared holm)", "metrics = [kl] (declared all)",
                 "energy = false (declared true)", "Not a pre-declared family",
                 "\"Declaring a primary endpoint\""):
        assert said in line, (said, line)
    assert "figures" not in line and "energy_resamples" not in line   # equal to the declared
    assert _line(methods, "- Family (the options metrics and energy = false, set after the sweep)")
    assert "[report] option" not in md
    summary = _line(md.split("## Methods")[0], "- Family:")
    assert "set after the sweep, not declared in its config: correction, metrics, energy" in summary
    assert "left out by the option energy = false, set after the sweep" in summary
    payload = json.loads(rep.files["json"].read_text())
    assert payload["options_set_after_sweep"] == {
        "correction": {"declared": "holm", "used": "fdr_bh"},
        "metrics": {"declared": None, "used": ["kl"]},
        "energy": {"declared": True, "used": False}}


def test_options_equal_to_the_declared_ones_read_as_declared(tmp_path):
    f = make_frame(SPEC, n=20, seed=82)
    declared = _result(f, report=DECLARED)
    # the same values given again, and figures (which changes no claim) turned off
    rep = hypothesis_report(declared, tmp_path / "r", figures=False, **PRIMARY)
    md = rep.files["markdown"].read_text()
    assert "Set after the sweep" not in md and "set after the sweep" not in md
    assert _line(md, "- Family (the [report] options metrics and energy = false)")
    assert "left out by the [report] option energy = false)" in _line(md, "- Family:")
    assert json.loads(rep.files["json"].read_text())["options_set_after_sweep"] == {}
    # nothing given at all: the same report
    plain = hypothesis_report(declared, tmp_path / "p", figures=False)
    assert plain.files["markdown"].read_text() == md


def test_pairs_given_after_the_sweep_are_named(tmp_path):
    f = make_frame(SPEC, n=20, seed=83)
    rep = hypothesis_report(_result(f, report=DECLARED), tmp_path / "r", figures=False,
                            comparisons=[("QKQV", "KQV")])
    line = _line(rep.files["markdown"].read_text(), "- Set after the sweep")
    assert "comparisons = [QKQV vs KQV] (declared [KQV vs QKQV, KQV vs KV, QKQV vs KV])" in line, line
    after = json.loads(rep.files["json"].read_text())["options_set_after_sweep"]
    assert list(after) == ["comparisons"] and after["comparisons"]["used"] == [["QKQV", "KQV"]]


def test_margins_given_after_the_sweep_are_not_called_declared(tmp_path):
    f = make_frame(SPEC, n=20, seed=84)
    rep = hypothesis_report(_result(f, report=DECLARED), tmp_path / "r", figures=False,
                            equivalence={"kl": 0.5})
    md = rep.files["markdown"].read_text()
    assert "equivalence = {kl = 0.5} (declared none)" in _line(md, "- Set after the sweep")
    summary = md.split("## Methods")[0]
    assert _line(summary, "- 2 equivalence tests (TOST at the margins δ), one per")
    assert "declared margins" not in summary
