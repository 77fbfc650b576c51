"""Why QKQV's attention KL is not monotone in the bits on heavy-tailed keys (docs/results.md,
Claim 1): the MSE stage's scale error on near-one-hot keys.

Usage:
  .venv/bin/python experiments/spike_scale.py results/dalberto_d128

Reads a finished sweep of the d = 128 grid (experiments/dalberto_d128.toml; every budget of
a case sees the same trials, so budgets pair on the trial) and prints:

1. ``kvstats.theory.flat_vector_gain``: TurboQuant-mse reconstructs a one-hot key as g·key
   (its direction exact), g the sphere-law centroid of the cell holding 1/sqrt(d), times
   sqrt(d): |g - 1| is 0.20, 0.51, 0.25, 0.06 at 1..4 bits (d = 128), not monotone.
2. Per case, QKQV's and KQV's median attention KL and mean key norm ratio
   ||k_hat||/||k|| (the scale part of the 6D profile) at each budget n; QKQV codes keys
   with an (n-1)-bit MSE stage, KQV with an n-bit one.
3. The exact sign test of QKQV at n = 2 against n = 3 on the same trials, per case
   (exploratory: chosen after seeing the medians, outside any report family; Holm over
   the cases printed).
4. How near one-hot the keys that carry the attention are: for fresh trials of each case
   (kvstats.sample, 200 trials, seed 0; not the sweep's trials), the median share of the
   top key's energy in its largest channel, and the median relative error
   ||k_hat - k||/||k|| of that key under TurboQuant-mse at 1..4 bits.
"""

from __future__ import annotations

import argparse
import ast

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep", help="a finished sweep folder of the d = 128 grid")
    args = ap.parse_args()

    import kvstats
    from kvstats.stats import adjust_pvalues, sign_test
    from kvstats.theory import flat_vector_gain

    res = kvstats.load_result(args.sweep)
    f = res.frame
    dim = int(f.dim.iloc[0])
    print(f"1. flat-vector gain g (d = {dim}): "
          + ", ".join(f"{b} bits: {flat_vector_gain(b, dim):.3f}" for b in range(1, 7)))

    cases = list(dict.fromkeys(zip(f.distribution, f.params)))
    print("\n2. median KL (mean key norm ratio) by budget n")
    tests = []
    for dist, params in cases:
        g = f[(f.distribution == dist) & (f.params == params)]
        for scheme in ("QKQV", "KQV"):
            s = g[g.scheme == scheme]
            cells = [f"n={int(n)}: {np.median(c.kl):.3g} ({c.norm_ratio_k.mean():.3f})"
                     for n, c in s.groupby("budget")]
            print(f"  {dist} {params} {scheme}: " + "; ".join(cells))
        q = g[g.scheme == "QKQV"]
        a, b = (q[q.budget == n].sort_values("trial").kl.to_numpy() for n in (2, 3))
        if len(a) and len(a) == len(b):
            tests.append((dist, params, sign_test(a, b)))
    adj = adjust_pvalues([t.pvalue for *_, t in tests], "holm").pvalues_adjusted if tests else []
    print("\n3. QKQV n = 2 vs n = 3, exact sign test on the same trials (dominance > 0: n = 2 larger KL)")
    for (dist, params, t), p in zip(tests, adj):
        print(f"  {dist} {params}: dominance {t.dominance:+.3f}, n(2 > 3) = {t.n_positive} of "
              f"{t.n_positive + t.n_negative} differing, p = {t.pvalue:.2g}, Holm over {len(tests)} cases p = {p:.2g}")

    print("\n4. the top key (largest exact logit) of fresh trials: channel share, and its relative error under TurboQuant-mse")
    for dist, params in cases:
        # the params label's values as written ("rank=8" an int, "nu=3.0" a float)
        kw = {} if params == "-" else {k: ast.literal_eval(v) for k, v in (kv.split("=") for kv in params.split(","))}
        t = kvstats.sample(dist, 200, int(f.n_keys.iloc[0]), dim, seed=0, **kw)
        top = np.einsum("tqd,tnd->tqn", t.q, t.K)[:, 0].argmax(-1)
        k = t.K[np.arange(200), top].astype(np.float64)[:, None, :]
        share = np.median((k[:, 0] ** 2).max(-1) / (k[:, 0] ** 2).sum(-1))
        errs = []
        for bits in range(1, 5):
            s = kvstats.make_scheme("turboquant_mse", bits, dim, seed=bits, draws=200, norm_dtype="float64")
            kh, _ = s.roundtrip(k, k)
            errs.append(np.median(np.linalg.norm(kh - k, axis=-1) / np.linalg.norm(k, axis=-1)))
        print(f"  {dist} {params}: largest channel's share {share:.2f}; relative error at 1..4 bits "
              + ", ".join(f"{e:.3f}" for e in errs))


if __name__ == "__main__":
    main()
