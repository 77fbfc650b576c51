"""Paired arms identical in every pair: the TOST says so (``identical_pairs``) and the
report's verdict carries "identical in all n pairs", since their p-value is a bound on
what was not seen, while arms 1e-9 apart are tested on their spread (p-values unchanged)."""

import numpy as np
import pytest

from kvstats.report.wording import equivalence_verdict_text
from kvstats.stats import equivalence_verdict, tost_rank, tost_ratio

N = 100


def _tests():
    return {"fieller": lambda x, y, paired: tost_ratio(x, y, margin=0.1, paired=paired),
            "delta": lambda x, y, paired: tost_ratio(x, y, margin=0.1, paired=paired, method="delta"),
            "rank": lambda x, y, paired: tost_rank(x, y, delta=0.1, paired=paired)}


@pytest.mark.parametrize("name", ["fieller", "delta", "rank"])
def test_identical_pairs_are_flagged_and_worded(name):
    test = _tests()[name]
    x = np.random.default_rng(0).random(N)
    same = test(x, x.copy(), True)
    near = test(x, x * (1 + 1e-9), True)
    unpaired = test(x, x.copy(), False)           # no pairs: nothing to label
    assert (same.identical_pairs, near.identical_pairs, unpaired.identical_pairs) == (True, False, False)
    texts = [equivalence_verdict_text(equivalence_verdict(r), r.identical_pairs, r.n_x)
             for r in (same, near, unpaired)]
    assert texts[0] == equivalence_verdict(same) + f" (identical in all {N} pairs)"
    assert "identical" not in texts[1] and "identical" not in texts[2]
    assert texts[1].startswith(equivalence_verdict(near))   # "different" says which test rejected


def test_the_jump_the_label_explains_is_unchanged():
    # the p-values behind the label (docs/statistics.md, "Identical paired trials"): the
    # Fieller test's bound of one unseen discordant pair on identical values against the t
    # model on values 1e-9 apart; "delta" has no spread in its linearisation there
    x = np.random.default_rng(0).random(N)
    same = tost_ratio(x, x.copy(), margin=0.1, paired=True)
    near = tost_ratio(x, x * (1 + 1e-9), margin=0.1, paired=True)
    assert same.method == near.method == "fieller-paired"
    assert same.pvalue == pytest.approx(0.010828, rel=1e-4) and near.pvalue < 1e-30
    assert tost_ratio(x, x.copy(), margin=0.1, paired=True, method="delta").method == "degenerate"
    # one pair apart by one ulp is not identical: the label is about the data, exactly
    # (the cheap delta method: the flag does not depend on the method)
    y = x.copy()
    y[7] = np.nextafter(y[7], 2.0)
    assert not tost_ratio(x, y, margin=0.1, paired=True, method="delta").identical_pairs


def test_verdict_text_validation():
    assert equivalence_verdict_text("inconclusive") == "inconclusive"
    assert equivalence_verdict_text("different", True, np.int64(3)) == (
        "different (the difference test rejects; not a test that the margin is exceeded) "
        "(identical in all 3 pairs)")
    for bad in (0, -1, 2.0, True, None):
        with pytest.raises(ValueError, match="n_pairs must be the number of pairs"):
            equivalence_verdict_text("inconclusive", True, bad)
