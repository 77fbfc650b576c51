"""Type-I error on real trials, trials vs texts (clusters) as the unit: Mann–Whitney, and
the exact sign test of the paired (shared) design.

Usage: nice -n 10 .venv/bin/python experiments/real_cluster_calibration.py
       [--capture results/real/capture.npz] [--scheme KQV] [--bits 4] [--layers 0,3,...,27]
       [--draws 16] [--replicates 4000] [--seed 0] [--alpha 0.05]

The null holds by construction: the same scheme twice, with independent draws of its
randomness. A pool of ``--draws`` independent draws of the scheme is applied to every
trial of the capture (one trial per text, layer and KV head: kvstats.load_trials, 26 texts
x 10 layers x 3 heads = 780 trials by default), giving each trial's metrics once per
draw. In each replicate every trial takes two distinct draws of the pool at random (one
per arm, independently of every other trial), and the arms are

- split (the texts differ between the arms): the texts are split at random 13/13; arm A
  holds the trials of the first half, arm B those of the second;
- shared (the sweep's design: every scheme sees the same texts): both arms hold every
  trial, each under its own draw;

compared by Mann–Whitney on (a) the trials and (b) the cluster means (one value per
text and arm, as kvstats.analysis.aggregate_clusters computes them). The shared design's
arms are also paired, as the report's ``pairing = "trial"`` pairs them: the exact sign
test (the report's paired location test) on (c) the trials matched by trial and (d) the
text means matched by text. Under this null each pair's difference is symmetric about 0
and the pairs are independent given the pool (every trial's two draws are its own), so the
sign test is valid at both levels; Mann–Whitney on the shared arms is not (they are
correlated: the same trials). Given the pool, a
trial's value has the same distribution in either arm and the split is independent of
the values, so the null holds exactly for the texts as units, whatever the pool. The
p-values are kvstats.stats.mann_whitney's, vectorised over replicates and metrics
(scipy's asymptotic test at these sizes, the exact law of U for arms of at most 8 texts,
the exact test conditional on ties for tied samples where affordable), on the values the
report's two-sample tests see (pooled values equal up to floating-point rounding made
one, kvstats.analysis.resolution.rounding_canonical: tie_rounding); the sign-test p-values
are the report's (kvstats.stats.sign_test on the pairs that differ by more than
floating-point rounding, kvstats.analysis.resolution.rounding_ties: zero differences
dropped, the number of positive ones against Bin(non-zero, 1/2), two-sided as R's
binom.test: twice the smaller tail, at most 1), vectorised here (sign_pvalues). A trial's
recall@5 (a mean of k/5 over its query heads) and a text's mean of recall@5 or argmax
shift can be equal in exact arithmetic and differ in the last bit; such values are tied,
as in the report, not a win that rounding chose. The exact sign test is discrete: with m non-zero
differences it rejects at ``--alpha`` with probability sign_test_size(m) <= alpha (0.0290
at m = 26, the texts), so its columns are judged against that size, averaged over the
replicates' m, not against alpha. The first replicate checks the cluster means against
aggregate_clusters and every p-value against the kvstats function (the sign test: the
report's own row, kvstats.analysis.compare's). The random stream is
the Mann–Whitney-only version's: the paired columns reuse its arms and did not move the
others (the rounding ties did, for recall@5 and argmax shift only). The rejection rate at
``--alpha`` over the replicates is printed per metric with the central 99% binomial band
of a test at its level (replicates are independent given the pool).
Also printed: the intra-cluster correlation of each metric (one-way ANOVA estimator on
draw 0) and the design effect 1 + (m - 1) ρ it implies for clusters of m trials.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pandas as pd
from scipy import special, stats

import kvstats
from kvstats.analysis import METRICS, aggregate_clusters
from kvstats.analysis.compare import _sign_row
from kvstats.analysis.resolution import rounding_canonical, rounding_ties
from kvstats.data.real import trial_clusters
from kvstats.stats import mann_whitney
from kvstats.stats.rank import _auto_exact_without_ties, _mwu_exact_pvalue, _mwu_pvalue


def pool_of_draws(trials, scheme: str, bits: int, draws: int, seed: int) -> pd.DataFrame:
    """Per-trial metrics of every trial under each of ``draws`` independent scheme draws."""
    clusters = trial_clusters(trials)
    parts = []
    for d in range(draws):
        sch = kvstats.make_scheme(scheme, bits, trials.dim, seed=np.random.SeedSequence([seed, d]),
                                  draws=trials.n_trials)
        prof = kvstats.error_profile(trials, *sch.roundtrip(trials.K, trials.V))
        parts.append(prof.assign(draw=d, cluster=clusters, distribution="real", params="-",
                                 dim=trials.dim, n_keys=trials.n_keys, budget=float(bits),
                                 scheme=f"{scheme}#{d}", bits_nominal=float(bits),
                                 bits_total=float(bits)))
    return pd.concat(parts, ignore_index=True)


def _two_sided_half(k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """R's ``binom.test(k, n, 0.5)`` two-sided p-value, elementwise (n >= 1).

    Twice the smaller exact tail, at most 1; exactly 1 when |2k - n| <= 1 (the tails then
    cover every outcome), as kvstats.stats.sign_test.
    """
    lower = stats.binom.cdf(k, n, 0.5)          # P(X <= k)
    upper = stats.binom.sf(k - 1, n, 0.5)       # P(X >= k)
    p = np.minimum(1.0, 2.0 * np.minimum(lower, upper))
    return np.where(np.abs(2 * k - n) <= 1, 1.0, p)


def differing(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Which pairs differ for the sign test: not equal up to floating-point rounding.

    The report's rule, kvstats.analysis.resolution.rounding_ties (a 1-D function, applied
    here to the flattened pairs), elementwise over arrays of one shape.

    Examples
    --------
    >>> differing(np.array([[0.8, 0.8, 0.5]]), np.array([[0.8000000000000002, 0.9, 0.5]])).tolist()
    [[False, True, False]]
    """
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if x.shape != y.shape:
        raise ValueError(f"x and y must be paired (the same shape); received shapes {x.shape} and {y.shape}")
    return ~rounding_ties(x.ravel(), y.ravel()).reshape(x.shape)


def sign_pvalues(x: np.ndarray, y: np.ndarray, axis: int = 1) -> np.ndarray:
    """Two-sided exact sign-test p-values of x vs y paired along ``axis``, vectorised.

    The report's sign test (kvstats.stats.sign_test, alternative "two-sided", on the pairs
    that :func:`differing` keeps): zero differences and differences within floating-point
    rounding dropped, the number of pairs with x > y against Bin(m, 1/2) for the m others,
    twice the smaller tail (at most 1); p = 1 when no pair differs. Returns the p-values
    with ``axis`` removed.

    Examples
    --------
    >>> x = np.array([[5.0, 6, 7, 8, 9, 9, 1, 2]])
    >>> y = np.array([[1.0, 2, 3, 4, 5, 9, 0, 0]])
    >>> float(sign_pvalues(x, y)[0])         # R: binom.test(7, 7, 0.5)$p.value = 2^-6
    0.015625
    >>> float(sign_pvalues(x, np.where(x == 9, x + 2e-15, y))[0])   # 9 vs 9 + 2e-15: a tie
    0.03125
    """
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    diff = differing(x, y)
    k = np.sum(diff & (x > y), axis=axis)
    m = np.sum(diff, axis=axis)
    # m = 0 rows: a harmless m = 1 inside, then p = 1
    return np.where(m == 0, 1.0, _two_sided_half(k, np.maximum(m, 1)))


def tie_rounding(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two samples per replicate and metric, values equal up to floating-point rounding made one.

    The report's two-sample rule (kvstats.analysis.resolution.rounding_canonical, a 1-D
    function of the pooled values) applied to every (replicate, metric) of arrays shaped
    (replicates, n, metrics), so that Mann–Whitney ranks 0.8 and 0.8000000000000002 as a tie.

    Examples
    --------
    >>> x, y = tie_rounding(np.array([[[0.8], [0.4]]]), np.array([[[0.8000000000000002], [0.9]]]))
    >>> x[0, :, 0].tolist(), y[0, :, 0].tolist()
    ([0.8, 0.4], [0.8, 0.9])
    """
    x, y = np.array(x, np.float64), np.array(y, np.float64)    # copies: filled in place
    for i in range(x.shape[0]):
        for j in range(x.shape[2]):
            x[i, :, j], y[i, :, j] = rounding_canonical(x[i, :, j], y[i, :, j])
    return x, y


def sign_test_size(m: np.ndarray, alpha: float) -> np.ndarray:
    """P(two-sided exact sign-test p <= ``alpha``) under the null with m non-zero
    differences: the level the discrete test attains (0 for m = 0).

    Examples
    --------
    >>> [round(float(v), 5) for v in sign_test_size(np.array([5, 6, 26]), 0.05)]   # 0, 2/2^6
    [0.0, 0.03125, 0.02896]
    """
    m = np.asarray(m, np.int64)
    table = np.zeros(int(m.max(initial=0)) + 1)      # the size for every m up to the largest
    for n in range(1, table.size):
        k = np.arange(n + 1)
        table[n] = stats.binom.pmf(k, n, 0.5)[_two_sided_half(k, np.full(n + 1, n)) <= alpha].sum()
    return table[m]


def tie_free_pvalues(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Two-sided Mann–Whitney p-values of x vs y along axis 1 as kvstats.stats.mann_whitney
    gives them on tie-free samples (``method="auto"``), vectorised over the other axes.

    Exact (kvstats' law of U, tabulated once for the arms' sizes) when its rule picks the
    exact test, i.e. min(n) <= 8, else scipy's asymptotic test. Tied samples are the
    caller's to redo with their own rule.

    Examples
    --------
    >>> from kvstats.stats import mann_whitney
    >>> x, y = np.array([[[1.0], [2.0], [5.0]]]), np.array([[[3.0], [4.0], [6.0], [7.0]]])
    >>> float(tie_free_pvalues(x, y)[0, 0]) == mann_whitney(x[0, :, 0], y[0, :, 0]).pvalue
    True
    """
    res = stats.mannwhitneyu(x, y, axis=1, method="asymptotic")
    n_x, n_y = x.shape[1], y.shape[1]
    if not _auto_exact_without_ties(n_x, n_y):
        return res.pvalue
    law = np.array([_mwu_exact_pvalue(float(u), n_x, n_y, "two-sided") for u in range(n_x * n_y + 1)])
    return law[np.rint(res.statistic).astype(np.int64)]   # U is an integer without ties


def icc(values: np.ndarray, clusters: np.ndarray) -> float:
    """One-way ANOVA estimator of the intra-cluster correlation (balanced clusters)."""
    labels, inv = np.unique(clusters, return_inverse=True)
    k, n = labels.size, values.size
    m = n / k
    means = np.bincount(inv, weights=values) / np.bincount(inv)
    msb = m * np.sum((means - values.mean()) ** 2) / (k - 1)
    msw = np.sum((values - means[inv]) ** 2) / (n - k)
    return float((msb - msw) / (msb + (m - 1) * msw))


def markdown(table: pd.DataFrame) -> str:
    """A Markdown table (no tabulate dependency); rates with 4 decimals."""
    def cell(v):
        return f"{v:.4f}" if isinstance(v, float) else str(v)
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * table.shape[1]]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    """Run the calibration and print it (``argv``: the arguments; default sys.argv); return the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--capture", default="results/real/capture.npz",
                    help="capture .npz (experiments/real_capture.py; default results/real/capture.npz)")
    ap.add_argument("--scheme", default="KQV", help="a randomized scheme (default KQV)")
    ap.add_argument("--bits", type=int, default=4, help="bits per coordinate n (default 4)")
    ap.add_argument("--layers", default="0,3,6,9,12,15,18,21,24,27",
                    help="comma-separated layers, or 'all' (default every third of 30)")
    ap.add_argument("--draws", type=int, default=16, help="independent scheme draws in the pool")
    ap.add_argument("--replicates", type=int, default=4000, help="replicates (random splits and draws; default 4000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--alpha", type=float, default=0.05)
    args = ap.parse_args(argv)
    if args.draws < 2:
        ap.error("--draws must be at least 2 (two distinct draws per replicate)")
    t0 = time.perf_counter()
    print(f"load average at start: {os.getloadavg()}")
    layers = None if args.layers == "all" else [int(v) for v in args.layers.split(",")]
    trials = kvstats.load_trials(args.capture, layer=layers).astype(np.float64)
    clusters = trial_clusters(trials)
    texts = np.unique(clusters)
    per_text = trials.n_trials // texts.size
    print(f"{trials.n_trials} trials: {texts.size} texts x {per_text} (layers x KV heads); "
          f"{args.scheme} n={args.bits}, pool of {args.draws} draws, {args.replicates} replicates")

    pool = pool_of_draws(trials, args.scheme, args.bits, args.draws, args.seed)
    t_pool = time.perf_counter() - t0
    vals = pool[list(METRICS)].to_numpy(np.float64).reshape(args.draws, trials.n_trials, len(METRICS))
    trials_of = np.stack([np.flatnonzero(clusters == t) for t in texts])  # (texts, per_text)

    rng = np.random.default_rng(args.seed + 1)
    R, half, every = args.replicates, texts.size // 2, np.arange(trials.n_trials)
    pvals = {(d, u): np.empty((R, len(METRICS))) for d in ("split", "shared") for u in ("trials", "texts")}
    # the shared arms paired (trial with trial, text mean with text mean): sign test, and
    # each replicate's number of non-zero differences (the discrete test's size needs it)
    paired = {u: np.empty((R, len(METRICS))) for u in ("trials", "texts")}
    nonzero = {u: np.empty((R, len(METRICS)), np.int64) for u in ("trials", "texts")}
    # pairs that differ only by rounding (ties for the sign test, wins under x > y)
    rounded = {u: np.empty((R, len(METRICS)), np.int64) for u in ("trials", "texts")}
    first = None
    for start in range(0, R, 250):  # chunks of replicates bound the memory
        r = min(R, start + 250) - start
        # each trial's own draw, independent across trials, arms and replicates
        pick_a = rng.integers(args.draws, size=(r, trials.n_trials))
        pick_b = (pick_a + rng.integers(1, args.draws, size=(r, trials.n_trials))) % args.draws
        xa, xb = vals[pick_a, every], vals[pick_b, every]          # (r, trials, metrics)
        ca, cb = xa[:, trials_of].mean(axis=2), xb[:, trials_of].mean(axis=2)  # (r, texts, metrics)
        perm = np.argsort(rng.random((r, texts.size)), axis=1)
        ta, tb = np.sort(perm[:, :half], axis=1), np.sort(perm[:, half:], axis=1)
        rows = np.arange(r)[:, None]
        arms = {("split", "trials"): (xa[rows, trials_of[ta].reshape(r, -1)], xb[rows, trials_of[tb].reshape(r, -1)]),
                ("split", "texts"): (ca[rows, ta], cb[rows, tb]),
                ("shared", "trials"): (xa, xb),
                ("shared", "texts"): (ca, cb)}
        for key, (x, y) in arms.items():
            # what kvstats.stats.mann_whitney computes, on the values the report's two-sample
            # tests see (rounding ties made ties): without ties scipy's asymptotic test, or
            # for small arms (min(n) <= 8: fewer than 18 texts split in two) kvstats' exact
            # law of U, both vectorised over replicates and metrics; with ties its "auto"
            # runs the exact test conditional on them where affordable, so tied samples
            # (recall, argmax shift) go through its own rule one by one
            xr, yr = tie_rounding(x, y)
            pv = tie_free_pvalues(xr, yr)
            pooled = np.sort(np.concatenate([xr, yr], axis=1), axis=1)
            for i, j in zip(*np.nonzero((np.diff(pooled, axis=1) == 0).any(axis=1))):
                pv[i, j] = _mwu_pvalue(xr[i, :, j], yr[i, :, j], "two-sided", "auto")[1]
            pvals[key][start:start + r] = pv
        for unit in paired:
            x, y = arms["shared", unit]
            paired[unit][start:start + r] = sign_pvalues(x, y, axis=1)
            keep = differing(x, y)
            nonzero[unit][start:start + r] = np.sum(keep, axis=1)
            rounded[unit][start:start + r] = np.sum(~keep & (x != y), axis=1)
        if first is None:
            first = (arms, xa[0], ta[0], tb[0])
    # spot checks on the first replicate: the cluster means are aggregate_clusters', the
    # p-values kvstats.stats.mann_whitney's and the report's sign test's (compare's row)
    arms, x0, ta0, tb0 = first
    frame = pool[pool["draw"] == 0].drop(columns="draw").assign(**{m: x0[:, j] for j, m in enumerate(METRICS)})
    agg = aggregate_clusters(frame)
    np.testing.assert_allclose(agg[list(METRICS)].to_numpy(), arms["shared", "texts"][0][0], rtol=1e-12)
    for key, (x, y) in arms.items():
        ref = [mann_whitney(*rounding_canonical(x[0, :, j], y[0, :, j])).pvalue for j in range(len(METRICS))]
        np.testing.assert_allclose(pvals[key][0], ref, rtol=1e-10)
    for unit in paired:
        x, y = arms["shared", unit]
        ref = [_sign_row(x[0, :, j], y[0, :, j])["pvalue"] for j in range(len(METRICS))]
        np.testing.assert_allclose(paired[unit][0], ref, rtol=1e-12)
    rej = {key: (p <= args.alpha).sum(axis=0) for key, p in pvals.items()}
    rej.update({("shared, sign", u): (p <= args.alpha).sum(axis=0) for u, p in paired.items()})
    # the sign test's attained level, averaged over the replicates' numbers of non-zero pairs
    size = {u: sign_test_size(m, args.alpha).mean(axis=0) for u, m in nonzero.items()}

    lo = stats.binom.ppf(0.005, args.replicates, args.alpha) / args.replicates
    hi = stats.binom.isf(0.005, args.replicates, args.alpha) / args.replicates
    rows = []
    for j, m in enumerate(METRICS):
        rho = icc(vals[0, :, j], clusters)
        rows.append({"metric": m, "ICC": f"{rho:.3f}", "design effect": f"{1 + (per_text - 1) * rho:.2f}",
                     **{f"{d}: {u}": rej[d, u][j] / R for d in ("split", "shared", "shared, sign")
                        for u in ("trials", "texts")}})
    table = pd.DataFrame(rows)
    print(f"\ntype-I error at alpha = {args.alpha} (rate of p <= alpha over {args.replicates} replicates); "
          f"99% binomial band of a level-{args.alpha} test: [{lo:.4f}, {hi:.4f}]")
    print(markdown(table))
    inflation = table["split: trials"] / args.alpha
    print(f"\ntrial-level inflation (split, rate / alpha): {inflation.min():.1f}x to {inflation.max():.1f}x; "
          f"text-level rates inside the band: {int(table['split: texts'].between(lo, hi).sum())}/{len(table)}")
    for unit in ("trials", "texts"):
        col = table[f"shared, sign: {unit}"].to_numpy()
        # 99% band of a test at the attained size, per metric (the binomial band at the
        # mean size: at least as wide as that of the replicates' mixture of sizes)
        s_lo = stats.binom.ppf(0.005, R, size[unit]) / R
        s_hi = stats.binom.isf(0.005, R, size[unit]) / R
        inside = (col >= s_lo) & (col <= s_hi)
        print(f"shared design, sign test on the {unit}: rates {col.min():.4f} to {col.max():.4f}; "
              f"attained size {size[unit].min():.4f} to {size[unit].max():.4f}; inside the 99% band "
              f"of the size: {int(inside.sum())}/{len(table)}; inside the level-{args.alpha} band: "
              f"{int(((col >= lo) & (col <= hi)).sum())}/{len(table)}")
        for j, m in enumerate(METRICS):
            print(f"    {m:13s} rate {col[j]:.4f}  size {size[unit][j]:.4f}  band [{s_lo[j]:.4f}, {s_hi[j]:.4f}]"
                  f"  non-zero pairs {nonzero[unit][:, j].min()}-{nonzero[unit][:, j].max()}"
                  f"  equal up to rounding: {rounded[unit][:, j].sum()} pairs in "
                  f"{np.count_nonzero(rounded[unit][:, j])} replicates")
    # for callers: the attained sizes and the range of non-zero pairs, per unit and metric
    table.attrs["sign size"] = size
    table.attrs["sign non-zero pairs"] = {u: (m.min(axis=0), m.max(axis=0)) for u, m in nonzero.items()}
    table.attrs["sign rounding ties"] = {u: c.sum(axis=0) for u, c in rounded.items()}
    print(f"pool {t_pool:.1f} s, total {time.perf_counter() - t0:.1f} s; load average at end: {os.getloadavg()}")
    return table


if __name__ == "__main__":
    main()
