"""The statistics API directly: two schemes' per-trial metrics, each test, and what its p-value means.

``kvstats.compare_schemes`` and the report run these tests for you; this script calls
them one by one (``kvstats.stats``) on two schemes' per-trial error profiles, so that
each p-value can be read on its own:

1. the paired family (both schemes coded the same trials, the report's design): a sign
   test per metric, the energy test of the whole 6D profile with within-pair swaps, and
   an equivalence test (TOST) of the mean KL ratio; Holm's correction over the family,
   and whether each test could have rejected at all under it (its resolution);
2. the two-sample tests, for schemes measured on different trials (here: the second
   scheme on trials of another seed): Mann–Whitney, Kolmogorov–Smirnov and the energy
   test with free relabelling.

    .venv/bin/python examples/hypothesis_tests.py                 # KQV vs KV, n = 3, 300 trials: 7 s wall, 4 s CPU
    .venv/bin/python examples/hypothesis_tests.py --a QKQV --b KQV --bits 4
    .venv/bin/python examples/hypothesis_tests.py --fast --trials 12   # too few trials: a row not resolvable
    .venv/bin/python examples/hypothesis_tests.py --fast --out /tmp/ht   # 60 trials: 2 s wall (the tests run it)

OUT/paired_family.csv holds the family's tests (raw and Holm-adjusted p, resolution).
Times: the 2-core machine at load average 2-4, one BLAS thread, 2026-12-02.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np
import pandas as pd

import kvstats
from kvstats import stats
from kvstats.metrics import METRIC_TABLE, PROFILE_6D
from kvstats.stats import required_resolution

ALPHA = 0.05
METRICS = ["kl", "snr_k", "snr_v", "snr_t", "recall_at_5", "argmax_shift"]


def profile(scheme: str, bits: int, trials, seed: int) -> pd.DataFrame:
    """Per-trial 6D profile and attention metrics of ``scheme`` on ``trials`` (one draw per trial)."""
    coder = kvstats.make_scheme(scheme, bits, trials.K.shape[-1], seed=seed, draws=trials.K.shape[0])
    return kvstats.error_profile(trials, *coder.roundtrip(trials.K, trials.V))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", default="KQV", help="first scheme (default KQV)")
    ap.add_argument("--b", default="KV", help="second scheme (default KV)")
    ap.add_argument("--bits", type=int, default=3, help="budget n of both (default 3)")
    ap.add_argument("--margin", type=float, default=0.2,
                    help="equivalence margin delta of the KL ratio: within [1/(1+delta), 1+delta] (default 0.2)")
    ap.add_argument("--fast", action="store_true", help="60 trials of N = 128 (seconds): what the tests run")
    ap.add_argument("--trials", type=int, default=None, help="trials (default 300; 60 with --fast)")
    ap.add_argument("--out", default=None, help="folder for paired_family.csv (default: a new temp folder, kept: delete it after)")
    args = ap.parse_args(argv)
    n_trials, n_keys, dim = (60, 128, 64) if args.fast else (300, 512, 64)
    n_trials = args.trials or n_trials
    a, b = args.a, args.b

    trials = kvstats.sample("gaussian", n_trials=n_trials, n_keys=n_keys, dim=dim, seed=0)
    pa, pb = profile(a, args.bits, trials, seed=1), profile(b, args.bits, trials, seed=2)
    print(f"{a} vs {b} at n = {args.bits}: {n_trials} Gaussian trials of N = {n_keys}, d = {dim}, "
          "coded by both (pairs: trial i with trial i)")

    # ---- 1. the paired family: every p-value the conclusions rest on, corrected together
    rows = []
    for metric in METRICS:
        t = stats.sign_test(pa[metric], pb[metric])
        rows.append({"test": "sign", "metric": metric, "pvalue": t.pvalue, "effect": t.dominance,
                     # the most extreme outcome, every differing pair one way: 2 * 2**-n_nonzero
                     "min_attainable_p": t.min_attainable_p, "n_informative": t.n_nonzero})
    resolution = required_resolution(len(METRICS) + 2, alpha=ALPHA, correction="holm")
    energy = stats.energy_test(pa[list(PROFILE_6D)], pb[list(PROFILE_6D)], paired=True, standardize=True,
                               n_resamples=max(999, resolution.n_permutations), seed=0)
    rows.append({"test": "energy (paired)", "metric": "6D profile", "pvalue": energy.pvalue,
                 "effect": energy.statistic, "min_attainable_p": energy.min_attainable_p,
                 "n_informative": n_trials})
    tost = stats.tost_ratio(pa.kl, pb.kl, margin=args.margin, paired=True)
    rows.append({"test": "TOST ratio", "metric": "kl", "pvalue": tost.pvalue, "effect": tost.estimate,
                 "min_attainable_p": np.nan, "n_informative": n_trials})
    family = pd.DataFrame(rows)
    holm = stats.adjust_pvalues(family.pvalue.to_numpy(), method="holm", alpha=ALPHA)
    family["pvalue_adjusted"] = holm.pvalues_adjusted
    family["reject"] = holm.reject
    # a test resolves when even its most extreme outcome reaches the correction's first step
    family["resolvable"] = family.min_attainable_p.isna() | (family.min_attainable_p <= resolution.p_needed)
    out = args.out or tempfile.mkdtemp(prefix="hypothesis_tests_")
    os.makedirs(out, exist_ok=True)
    family.to_csv(os.path.join(out, "paired_family.csv"), index=False)

    print(f"\n1. paired family of {len(family)} tests, Holm at alpha = {ALPHA}: a test must reach "
          f"p <= {resolution.p_needed:.3g} to reject in the worst case (the energy test: at least "
          f"{resolution.n_permutations} permutations; it draws {energy.n_resamples})")
    for r in family.itertuples():
        word = ("rejects" if r.reject else "does not reject" if r.resolvable else
                "NOT RESOLVABLE (no outcome of these trials could reject)")
        print(f"  {r.test:16s} {r.metric:12s} effect {r.effect:+8.3g}  p {r.pvalue:9.3g}  "
              f"p_adj {r.pvalue_adjusted:9.3g}  {word}")
    m = METRIC_TABLE["kl"]
    print(f"  means of kl ({m.unit}): {a} {pa.kl.mean():.4g}, {b} {pb.kl.mean():.4g}; KL ratio {tost.estimate:.3f}, "
          f"90% interval [{tost.low:.3f}, {tost.high:.3f}] against [{tost.margin_low:.3f}, {tost.margin_high:.3f}]")
    kl_sign = family[(family.test == "sign") & (family.metric == "kl")].iloc[0]
    kl_tost = family[family.test == "TOST ratio"].iloc[0]
    print("  KL verdict: " + stats.equivalence_verdict(kl_tost.pvalue_adjusted, kl_sign.pvalue_adjusted, alpha=ALPHA))

    # ---- 2. two independent samples: b on trials of another seed
    other = kvstats.sample("gaussian", n_trials=n_trials, n_keys=n_keys, dim=dim, seed=100)
    pb_other = profile(b, args.bits, other, seed=3)
    mw = stats.mann_whitney(pa.kl, pb_other.kl)
    ks = stats.ks_2samp(pa.kl, pb_other.kl)
    free = stats.energy_test(pa[list(PROFILE_6D)], pb_other[list(PROFILE_6D)], standardize=True,
                             n_resamples=999, seed=0)
    two = stats.adjust_pvalues([mw.pvalue, ks.pvalue, free.pvalue], method="holm", alpha=ALPHA)
    print(f"\n2. two samples ({a} on trials of seed 0, {b} on trials of seed 100), Holm over these 3:")
    print(f"  Mann–Whitney  kl   r = {mw.rank_biserial:+.3f} [{mw.rank_biserial_low:+.3f}, "
          f"{mw.rank_biserial_high:+.3f}]  p {mw.pvalue:.3g}  p_adj {two.pvalues_adjusted[0]:.3g}")
    print(f"  KS            kl   D = {ks.statistic:.3f}  p {ks.pvalue:.3g}  p_adj {two.pvalues_adjusted[1]:.3g}")
    print(f"  energy (free) 6D   E = {free.statistic:.4g}  p {free.pvalue:.3g}  p_adj {two.pvalues_adjusted[2]:.3g}")
    print(f"wrote {os.path.join(out, 'paired_family.csv')}")


if __name__ == "__main__":
    main()

# How to read the output.
# - sign: the share of trials where a's value exceeds b's; dominance = P(a > b) - P(a < b)
#   over the trials where they differ (lower KL is better, so a negative KL dominance favours
#   a). Its p-value: the chance of so lopsided a split if each trial were a coin flip.
# - energy (paired): are the two schemes' whole 6D profiles (SNR and angle of K, V, T,
#   standardised) distributed alike? p: the share of within-pair label swaps giving an
#   energy distance at least the observed one. It sees differences a single metric misses.
# - TOST ratio: a small p says mean KL(a)/mean KL(b) lies within the margin: evidence of
#   equivalence, which "no significant difference" is not. The verdict combines it with
#   the sign test: "equivalent within δ", "different" or "inconclusive".
# - Holm: each adjusted p is compared with alpha; the family's error rate (any false
#   rejection) stays below alpha. NOT RESOLVABLE marks a test whose best possible
#   p-value (a sign test with few differing trials: 2 * 2**-k; a permutation test with
#   too few permutations) cannot pass the correction's first step: more trials or a
#   smaller family, not a verdict on the schemes.
# - Mann–Whitney (r: rank-biserial, P(a > b) - P(a < b) for independent draws) and KS (the
#   largest gap between the two empirical CDFs) are for independent samples. On the
#   same trials use the paired tests above: the pairing removes the trial-to-trial
#   variation both schemes share.
