"""Synthetic per-trial frames with the sweep's columns, so the report is tested on known truths."""

import numpy as np
import pandas as pd

from kvstats.analysis import METRICS
from kvstats.results import SweepResult
from kvstats.sweep import SweepConfig


def make_frame(spec, n=60, seed=0, case=("gaussian", "-", 64, 128)):
    """spec: {(scheme, budget): shift}; every metric of a trial is N(shift, 1) (kl: exp of it)."""
    rng = np.random.default_rng(seed)
    parts = []
    for (scheme, budget), shift in spec.items():
        data = {m: rng.normal(shift, 1.0, n) for m in METRICS}
        data["kl"] = np.exp(data["kl"])  # positive, like a KL
        data["recall_at_5"] = rng.normal(shift, 1.0, n)
        data["ip_var"] = np.exp(rng.normal(shift, 0.1, n))
        parts.append(pd.DataFrame(data).assign(
            distribution=case[0], params=case[1], dim=case[2], n_keys=case[3], budget=float(budget),
            scheme=scheme, bits_nominal=float(budget), bits_total=float(budget) + 0.25,
            trial=np.arange(n)))
    return pd.concat(parts, ignore_index=True)


def clustered_frame(n_texts=12, per_text=10, seed=4):
    """Two schemes on the same texts; a strong text effect, no scheme effect."""
    rng = np.random.default_rng(seed)
    effect = rng.normal(0, 1, n_texts)
    parts = []
    for scheme in ("KQV", "QKQV"):
        for budget in (2.0, 3.0):
            text = np.repeat(np.arange(n_texts), per_text)
            data = {m: effect[text] + rng.normal(0, 0.3, text.size) for m in METRICS}
            data["kl"] = np.exp(data["kl"])
            parts.append(pd.DataFrame(data).assign(
                distribution="real", params="layer=0", dim=64, n_keys=256, budget=budget,
                scheme=scheme, bits_nominal=budget, bits_total=budget + 0.25,
                trial=np.arange(text.size), cluster=text))
    return pd.concat(parts, ignore_index=True)


def sweep_result(frame, schemes=("KQV", "QKQV"), report=None, distributions=("gaussian",)):
    """``frame`` wrapped as a SweepResult of a small config (report options ``report``)."""
    cfg = SweepConfig.from_dict({"schemes": list(schemes), "distributions": list(distributions),
                                 "budgets": [2, 3], "n_trials": 20,
                                 "report": {"bootstrap_resamples": 99, **(report or {})}})
    manifest = {"n_cells": 4, "seed": 0, "started": "t0", "finished": "t1", "seconds": 1.0,
                "n_computed": 4, "executor": "serial", "host": {"platform": "test", "cpus": 2},
                "git": None, "versions": {"numpy": np.__version__}}
    return SweepResult(frame, manifest, cfg)
