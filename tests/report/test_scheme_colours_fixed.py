"""One scheme, one look (colour, marker, line style) in every report: a built-in scheme's is
fixed by its place in the catalog (kvstats.quant.catalog.NAMES), whatever the config's
scheme order. Colours went by first appearance: KQV was orange in the quick report (after
KV) and blue in a report whose config listed it first."""

import itertools

import matplotlib.colors as mcolors

from kvstats.quant.catalog import NAMES
from kvstats.report.plots import _scheme_style, scheme_palette


def _look(schemes, scheme):
    pal = scheme_palette(schemes)
    style = _scheme_style(pal, scheme)
    return mcolors.to_hex(pal[scheme]), style["marker"], style["ls"]


def test_a_builtin_scheme_has_one_look_whatever_the_order_and_company():
    for scheme in ("KV", "KQV", "QKQV", "identity", "q4_0"):
        others = [s for s in ("KV", "KQV", "QKQV", "identity") if s != scheme]
        looks = {_look(list(order), scheme) for k in (0, 1, 2)
                 for group in itertools.combinations(others, k)
                 for order in itertools.permutations((scheme, *group))
                 if not (scheme == "q4_0" and "KV" in group)}   # q4_0 shares KV's colour (10 apart)
        assert len(looks) == 1, (scheme, looks)


def test_schemes_of_one_report_differ_and_a_users_takes_a_free_colour():
    for schemes in (["mine", "KV", "KQV"], ["KV", "q4_0", "mine", "q4_1", "KQV"], list(NAMES[:10])):
        pal = {s: mcolors.to_hex(c) for s, c in scheme_palette(schemes).items()}
        assert list(pal) == schemes                      # legend order: first appearance
        assert len(set(pal.values())) == len(schemes), pal
        styles = {(_scheme_style(scheme_palette(schemes), s)["marker"]) for s in schemes}
        assert len(styles) == len(schemes)
    # a scheme of one's own takes the lowest colour no built-in here holds (KV 0, QKQV 2)
    assert _look(["QKQV", "mine", "KV"], "mine") == _look(["KQV"], "KQV")
