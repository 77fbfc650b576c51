"""6D error profiles of KV, KQV, QKQV at n = 2..6 bits on the real SmolLM2 caches.

Usage: .venv/bin/python experiments/real_profile.py [--capture results/real/capture.npz]
       [--out results/real] [--synthetic-trials 300]

Trials: one per (text, layer, KV head) from kvstats.load_trials (the G = 3 query heads of
the group at the last position, N keys), each with its own independent draw of the
scheme's randomness (``draws = n_trials``). The same trials and the same seeds are used
for every scheme (paired design). Writes results/real/profile.csv (one row per trial,
scheme, budget), results/real/profile_cells.csv (their means per scheme and budget),
results/real/profile_tests.csv (KQV vs QKQV per budget and metric: the exact sign test on
the per-text means matched by text, the page's ``text_`` columns; the text is the unit
because the trials of one text share it) and results/real/synthetic_ranking.csv (how well
each synthetic distribution predicts the real ordering of the 15 scheme x budget cells).
"""

import argparse
import os
import time

import numpy as np
import pandas as pd
from scipy import stats as sps

import kvstats

SCHEMES = ("KV", "KQV", "QKQV")
BUDGETS = (2, 3, 4, 5, 6)
METRICS = ("kl", "recall_at_5", "snr_k", "phi_k", "snr_v", "snr_t", "phi_t")


def profile(trials, chunk=360, seed=0):
    """Error profiles of every scheme and budget; chunks of trials bound the memory."""
    rows = []
    for si, name in enumerate(SCHEMES):
        for n in BUDGETS:
            parts = []
            for start in range(0, trials.n_trials, chunk):
                sub = trials.subset(slice(start, min(trials.n_trials, start + chunk)))
                # Same seed for every scheme: paired design; a distinct stream per chunk.
                scheme = kvstats.make_scheme(name, n, trials.dim, seed=np.random.SeedSequence([seed, n, start]),
                                             draws=() if name == "KV" else sub.n_trials)  # KV has no randomness
                K_hat, V_hat = scheme.dequantize(scheme.quantize(sub.K, sub.V))
                df = kvstats.error_profile(sub, K_hat, V_hat)
                df["trial"] += start
                parts.append(df)
            df = pd.concat(parts, ignore_index=True)
            df.insert(0, "bits", n)
            df.insert(0, "scheme", name)
            rows.append(df)
    return pd.concat(rows, ignore_index=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--capture", default="results/real/capture.npz")
    ap.add_argument("--out", default="results/real")
    ap.add_argument("--synthetic-trials", type=int, default=300)
    args = ap.parse_args()
    t0 = time.time()
    os.makedirs(args.out, exist_ok=True)
    trials = kvstats.load_trials(args.capture)
    meta = pd.DataFrame({"trial": np.arange(trials.n_trials), "text": trials.meta["text"],
                         "layer": trials.meta["layer"], "head": trials.meta["head"]})
    real = profile(trials).merge(meta, on="trial")
    real.to_csv(os.path.join(args.out, "profile.csv"), index=False)
    print(f"real profiles: {trials.n_trials} trials x {len(SCHEMES) * len(BUDGETS)} cells, {time.time() - t0:.0f} s")

    # the report's test (experiments/, this script's folder, is on sys.path), text as the unit
    from real_report import kqv_qkqv_tests

    kqv_qkqv_tests(real, "text").to_csv(os.path.join(args.out, "profile_tests.csv"), index=False)

    # Which synthetic distribution predicts the real ordering of the scheme x budget cells?
    real_cells = real.groupby(["scheme", "bits"])[list(METRICS)].mean()
    rank_rows = []
    for dist in kvstats.DISTRIBUTIONS:
        syn = kvstats.sample(dist, args.synthetic_trials, trials.n_keys, trials.dim, seed=1,
                             n_queries=trials.n_queries, dtype=np.float32)
        cells = profile(syn, seed=2).groupby(["scheme", "bits"])[list(METRICS)].mean()
        for m in METRICS:
            rho = sps.spearmanr(real_cells[m], cells.loc[real_cells.index, m]).statistic
            # within-budget order of the three schemes, the question the paper asks
            agree = np.mean([list(real_cells.loc[(slice(None), n), m].sort_values().index)
                             == list(cells.loc[(slice(None), n), m].sort_values().index)
                             for n in BUDGETS])
            rank_rows.append(dict(distribution=dist, metric=m, spearman=rho, order_agreement=agree,
                                  kqv_over_qkqv_n4=cells.loc[("KQV", 4), m] / cells.loc[("QKQV", 4), m]))
    pd.DataFrame(rank_rows).to_csv(os.path.join(args.out, "synthetic_ranking.csv"), index=False)
    real_cells.to_csv(os.path.join(args.out, "profile_cells.csv"))
    print(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
