"""Each case's and pair's figure has a file of its own (referee R8, finding 1).

The figure names were the slugs of the case title and of the pair's labels, which drop
minus signs, "+", "." and case: the cases offset=-2.0 and offset=2.0 (now refused: one law,
its sign random per channel; tag="a-b" and tag="a+b" of a distribution of one's own collide
alike) wrote one set of Shannon–φ files, so the −2.0 section showed the +2.0 figures, and the pairs (K+V, KV) and
(K-V, KV) one crossover file. The names are now chosen once (kvstats.report.notation.
figure_names: the slug, with a short hash of the exact key where slugs collide) and the
document links each section's figure by that map.
"""

import re
import warnings

import kvstats
from kvstats.report.notation import figure_names

QUICK_CASES = [dict(distribution=d, params=p, dim=128, n_keys=256) for d, p in
               (("gaussian", "-"), ("heavy_tailed", "nu=1.5"), ("low_rank", "rank=8"),
                ("focused", "strength=0.5"))]
QUICK_PAIRS = [("KQV", "KV"), ("QKQV", "KV"), ("KQV", "QKQV")]


def _sweep(spec: dict):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return kvstats.run_sweep(spec, executor="serial", progress=False)


def test_names_without_a_collision_are_the_quick_reports_own():
    """No collision, no hash: the quick report's figures keep the names docs link (taken from
    its figures/ folder before this change)."""
    names = figure_names(QUICK_CASES, QUICK_PAIRS)
    assert sorted(names.values()) == sorted(
        [f"shannon_phi_{p}_{s}" for p in "kvt" for s in (
            "gaussian_d_128_n_256", "heavy_tailed_nu_1_5_d_128_n_256", "low_rank_rank_8_d_128_n_256",
            "focused_strength_0_5_d_128_n_256")]
        + ["crossover_kqv_vs_kv", "crossover_qkqv_vs_kv", "crossover_kqv_vs_qkqv"])


def test_colliding_slugs_get_distinct_stable_names():
    cases = [dict(distribution="outlier_channels", params=f"offset={o}", dim=32, n_keys=64)
             for o in ("-2.0", "2.0")]
    pairs = [("K+V", "KV"), ("K-V", "KV"), ("k_v", "KV")]
    names = figure_names(cases, pairs)
    assert len(set(names.values())) == len(names) == 3 * 2 + 3
    # each keeps its readable slug in front; the hash depends on the key alone
    assert all(n.startswith("shannon_phi_") and "outlier_channels_offset_2_0_d_32_n_64_" in n
               for k, n in names.items() if k[0] == "shannon_phi")
    assert figure_names(cases[::-1], pairs[::-1]) == names
    # a pair whose slug no other pair has keeps the plain name beside colliding cases
    assert figure_names(cases, [("KQV", "KV")])[("crossover", "KQV", "KV")] == "crossover_kqv_vs_kv"


def _links(md: str, caption_start: str) -> list[tuple[str, str]]:
    """(alt text, target) of each image whose alt text starts with ``caption_start``."""
    return re.findall(rf"!\[({re.escape(caption_start)}[^\]]*)\]\((figures/[^)]+)\)", md)


def _tagged(n, N, d, rng, params):
    """Gaussian keys shifted by the tag's length: cases that differ in a string parameter."""
    return rng.standard_normal((n, N, d)) + len(params["tag"])


def test_each_case_section_shows_its_own_shannon_phi_figures(tmp_path):
    """The referee's slug.py, its cases now tag="a-b" and tag="a+b" of a distribution of one's own
    (its offset=-2.0 and 2.0 of outlier_channels are one law, now refused as one case twice)."""
    from kvstats.data.register import registered_distribution

    with registered_distribution("tagged", _tagged, {"tag": "a"}):
        res = _sweep(dict(schemes=["KV", "KQV"], budgets=[3], dims=[32], n_keys=[64], n_trials=12,
                          distributions=[{"name": "tagged", "params": [{"tag": "a-b"}, {"tag": "a+b"}]}],
                          comparisons=[["KV", "KQV"]]))
        rep = kvstats.hypothesis_report(res, tmp_path, energy_resamples=19, bootstrap_resamples=99)
    shannon = {k: v for k, v in rep.figures.items() if k.startswith("shannon_phi_")}
    assert len(shannon) == 6 and len(set(shannon.values())) == 6
    assert len(list((tmp_path / "figures").glob("shannon_phi_*.png"))) == 6
    md = rep.files["markdown"].read_text()
    seen = set()
    for tag, other in (("a-b", "a+b"), ("a+b", "a-b")):
        title = f"tagged (tag='{tag}'), d = 32, N = 64"
        for place in "KVT":
            (alt, target), = [(a, t) for a, t in _links(md, f"Shannon–φ plane ({place}), ")
                              if a.startswith(f"Shannon–φ plane ({place}), {title}")]
            seen.add(target)
            # the linked file is drawn for this case: its SVG's title names the case's params
            svg = (tmp_path / target).with_suffix(".svg").read_text()
            assert f"(tag=&#x27;{tag}&#x27;)" in svg or f"(tag='{tag}')" in svg, svg[:2000]
            assert f"{other}&#x27;)" not in svg and f"{other}')" not in svg
    assert len(seen) == 6


def test_each_pair_shows_its_own_crossover_figure(tmp_path):
    """The referee's slug2.py: labels "K+V" and "K-V", both compared with KV."""
    res = _sweep(dict(schemes=["KV", {"name": "KQV", "label": "K+V"}, {"name": "QKQV", "label": "K-V"}],
                      budgets=[2, 3], distributions=["gaussian"], dims=[32], n_keys=[64], n_trials=12,
                      comparisons=[["K+V", "KV"], ["K-V", "KV"]]))
    rep = kvstats.hypothesis_report(res, tmp_path, energy_resamples=19, bootstrap_resamples=99)
    cross = {k: v for k, v in rep.figures.items() if k.startswith("crossover_")}
    assert len(cross) == 2 and len(list((tmp_path / "figures").glob("crossover_*.png"))) == 2
    names = figure_names([], [("K+V", "KV"), ("K-V", "KV")])
    md = rep.files["markdown"].read_text()
    for pair in (("K+V", "KV"), ("K-V", "KV")):
        (alt, target), = [(a, t) for a, t in _links(md, "Paired dominance across budgets ")
                          if f"({pair[0]} vs {pair[1]})" in a]
        assert target == f"figures/{names[('crossover', *pair)]}.png"
        assert rep.figures[names[("crossover", *pair)]].exists()
