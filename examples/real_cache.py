"""A real model's KV cache as the data: capture it, sweep it, test with the text as the unit.

Without ``--fast``: SmolLM2-135M-Instruct (its GGUF in ``~/.cache/kvstats`` or
``$KVSTATS_CACHE``; needs the ``models`` extra: torch, transformers) reads 16
standard-library docstrings, 128 tokens each, and ``kvstats.models.capture`` writes every
layer's keys, values and queries to OUT/capture.npz (236 MB; in a new temp folder without
``--out``, which is kept: delete it after). If the weights or torch are missing the script says so and exits 0 without
doing anything (it never downloads: run ``experiments/real_capture.py`` once for that, or
use ``--fast``).

With ``--fast``: a small capture of another "model" written from numpy arrays with
``write_capture`` (what you would do with your own model's cache): 16 texts, 2 layers,
2 KV heads of d = 32, 4 query heads, N = 64 tokens, each text with its own scale and
outlier channel, so that trials of one text resemble each other as real ones do.

Either capture then runs through ``run_sweep`` as the ``real`` distribution (one case per
layer; KQV vs QKQV at n = 3, 4) and ``hypothesis_report``, whose tests use the text as
the unit: the trials of one text (its KV heads) share the text's tokens and are not
independent, so they are averaged per text first.

    .venv/bin/python examples/real_cache.py --out /tmp/real     # 35 s wall, 32 s CPU, the capture included
    .venv/bin/python examples/real_cache.py --fast --out /tmp/rf # 5 s wall, 2 s CPU (the tests run it)

(The 2-core machine at load average 2-4, one BLAS and one torch thread, 2026-12-02.)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

import kvstats
from kvstats.data.capture_format import write_capture

METRICS = ["kl", "snr_t", "snr_k", "phi_k"]


def capture_smollm2(path: str, n_texts: int = 16, n_tokens: int = 128) -> list[int] | None:
    """Capture SmolLM2's cache of ``n_texts`` texts into ``path``; None when it cannot run here."""
    try:
        import torch
        from kvstats.models import capture, load_model
        from kvstats.models.texts import stdlib_texts
    except ImportError as err:
        print(f"real_cache: skipped: the models extra is not installed ({err}); "
              "pip install -e '.[models]', or run with --fast", file=sys.stderr)
        return None
    torch.set_num_threads(1)   # as experiments/real_capture.py: extra threads cost more than they save on a busy CPU
    try:
        model, tokenizer = load_model(download=False)
    except FileNotFoundError as err:
        print(f"real_cache: skipped: SmolLM2's weights are not cached ({err}); "
              "experiments/real_capture.py fetches them once, or run with --fast", file=sys.stderr)
        return None
    cap = capture(model, tokenizer, stdlib_texts()[:n_texts], max_tokens=n_tokens, path=path)
    n_layers = cap.K.shape[1]
    print(f"captured SmolLM2-135M-Instruct: K {cap.K.shape} (texts, layers, KV heads, N, d), "
          f"q {cap.q.shape} -> {path}")
    return [0, n_layers // 2, n_layers - 1]


def write_toy_capture(path: str, seed: int = 0) -> list[int]:
    """A small capture from arrays: texts that differ in scale and in an outlier channel."""
    n_texts, n_layers, n_kv, n_q, n_tokens, dim = 16, 2, 2, 4, 64, 32
    rng = np.random.default_rng(seed)
    shape = (n_texts, n_layers, n_kv, n_tokens, dim)
    scale = rng.uniform(0.5, 2.0, (n_texts, 1, 1, 1, 1))                 # one per text
    outlier = np.zeros((n_texts, 1, 1, 1, dim))
    outlier[np.arange(n_texts), 0, 0, 0, rng.integers(0, dim, n_texts)] = rng.uniform(3, 8, n_texts)
    K = (scale * rng.standard_normal(shape) + outlier).astype(np.float32)
    V = rng.standard_normal(shape).astype(np.float32)
    # queries lean on the keys' outlier channel, as real ones lean on theirs
    q = (rng.standard_normal((n_texts, n_layers, n_q, n_tokens, dim)) + 0.3 * outlier).astype(np.float32)
    write_capture(path, K, V, q, {"model": "toy: numpy arrays", "seed": seed})
    print(f"wrote a toy capture from arrays: K {K.shape} (texts, layers, KV heads, N, d), q {q.shape} -> {path}")
    return list(range(n_layers))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="a toy capture from arrays (seconds): what the tests run")
    ap.add_argument("--out", default=None, help="folder for the capture, sweep and report (default: a new temp folder, kept: delete it after)")
    args = ap.parse_args(argv)
    out = args.out or tempfile.mkdtemp(prefix="real_cache_")
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "capture.npz")
    layers = write_toy_capture(path) if args.fast else capture_smollm2(path)
    if layers is None:
        return

    # what the sweep will read: one trial per (text, layer, KV head), its query heads as queries
    header = kvstats.load_trials(path, layer=layers[0])
    n_texts = len(set(header.meta["cluster"]))
    n_trials, n_keys, dim = header.K.shape
    config = {"schemes": ["KQV", "QKQV"], "budgets": [3, 4], "dims": [dim], "n_keys": [n_keys],
              "n_trials": n_trials,       # every trial of the selection: all texts, all KV heads
              "distributions": [{"name": "real", "params": [{"path": path, "layer": layer} for layer in layers]}],
              "comparisons": [["KQV", "QKQV"]]}
    sweep_dir = os.path.join(out, "sweep")
    result = kvstats.run_sweep(config, out=sweep_dir, progress=False)
    frame = result.frame
    print(f"sweep: {len(frame)} rows: {len(layers)} layers x {n_trials} trials "
          f"({n_texts} texts x {n_trials // n_texts} KV heads) x 2 schemes x 2 budgets")

    # the unit: a text's trials averaged (what the report's tests use), then the paired tests on texts
    per_text = kvstats.aggregate_clusters(frame)
    print(f"units: {frame.cluster.nunique()} texts per case (the trial is not the unit: "
          f"{n_trials // n_texts} KV heads of one text share its tokens)")
    per_text = per_text.assign(layer=per_text.params.str.split(",").str[0])   # "layer=0,path='…'"
    means = per_text.groupby(["layer", "budget", "scheme"], sort=False)["kl"].mean().unstack()
    print("mean KL(p || p_hat) over texts (nats), per layer and n:\n"
          + means.to_string(float_format=lambda v: f"{v:.4g}"))

    report = kvstats.hypothesis_report(result, sweep_dir, figures=False, bootstrap_resamples=199,
                                       energy_resamples=99)
    tests = report.comparisons[(report.comparisons.test == "sign") & report.comparisons.metric.isin(METRICS)]
    print(f"\npaired sign tests on the {n_texts} texts, KQV (a) vs QKQV (b), "
          f"Holm over the report's {len(report.comparisons)} tests:")
    for r in tests.itertuples():
        print(f"  {r.params.split(',')[0]:8s} n = {r.budget:g}  {r.metric:6s} n_a = {r.n_a}  "
              f"dominance {r.effect:+.2f}  p_adj {r.pvalue_adjusted:.2g}  -> {r.winner}")
    print(f"report: {report.files['markdown']}")


if __name__ == "__main__":
    main()

# How to read the output.
# - The capture's shape says what a trial is: one (text, layer, KV head), the KV head's
#   group of query heads at the last position as its queries. A case is one layer here.
# - "units": the tests count texts, not trials. With 16 texts a sign test's smallest
#   p-value is 2 * 2**-16 before the correction (x the number of tests under Holm); with few texts and many tests a row
#   reads "not resolvable at n = ... pairs": capture more texts (experiments/real_capture.py
#   takes all 26) rather than trusting per-trial p-values, which would treat the KV heads
#   of one text as independent.
# - dominance is P(KQV > QKQV) - P(KQV < QKQV) over the texts where the two differ: for KL
#   and phi_k lower is better, so a negative dominance there favours KQV; for the SNRs
#   higher is better.
# - The report (report.md in the sweep folder) has the same tests, the per-trial ones
#   labelled "not independent", and the theory and rate–distortion tables of the capture.
