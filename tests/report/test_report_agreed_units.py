"""A sign test that could not have rejected because no pair differs at all is not "a limit of
the design": the two schemes' values were equal on every unit. The Summary counts such rows
apart, and the crossover counts and descriptions do not call them blind (critic_claims20 #4)."""

from kvstats.analysis.crossover import agreed_rows
from kvstats.report import hypothesis_report

from _sweep_frames import make_frame, sweep_result


def test_rows_where_no_pair_differs_are_counted_as_agreement(tmp_path):
    f = make_frame({("KQV", 2): 0.0, ("QKQV", 2): 0.0, ("KQV", 3): 0.0, ("QKQV", 3): 0.0},
                   n=40, seed=5)
    f["argmax_shift"] = 0.0                   # no top key moves, for either scheme: all pairs tied
    rep = hypothesis_report(sweep_result(f), tmp_path, figures=False, energy_resamples=19)
    comp = rep.comparisons
    sign = comp[(comp.test == "sign") & (comp.metric == "argmax_shift")]
    assert len(sign) == 2 and agreed_rows(sign).all()
    assert agreed_rows(comp).sum() == 2      # only those: every other metric's pairs differ
    md = rep.files["markdown"].read_text()
    summary = md.split("## Methods")[0]
    assert ("2 not resolvable (could not have rejected): 2 because no pair differs at all (the two "
            "schemes' values were equal on every unit") in summary
    assert "a limit of the design, not a finding about the schemes" not in summary
    # no crossover section sentence calls the argmax-shift triple blind
    assert "have a budget whose test could not have rejected" not in summary
    row = rep.crossovers.set_index("metric").loc["argmax_shift"]
    assert row["description"].endswith("no pair differs at any budget (the values were equal on every unit).")
