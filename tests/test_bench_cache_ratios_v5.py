"""bench_cache's speed ratios are per run (the two times of one lockstep run), shown as
median [min, max]; its stored code bytes are per coded token (referee T6 F2, F3)."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def bench(load_experiment):
    return load_experiment("bench_cache")


def test_run_ratios_pair_times_of_one_run(bench):
    # run 0 slow for both (load), run 1 fast for both: the per-run ratios are 0.9 and 0.9;
    # the ratio of the minima (5 / 10 = 0.5, from different runs) is not one of them
    base, config = [9.0, 5.0], [10.0, 5.0 / 0.9]
    assert np.allclose(bench.run_ratios(base, config), [0.9, 0.9])
    assert bench.spread(bench.run_ratios(base, config)) == "0.90 [0.90, 0.90]"
    assert bench.spread([0.95, 0.80, 0.90]) == "0.90 [0.80, 0.95]"     # median, not mean (0.883)
    assert bench.spread([1.234]) == "1.23"


@pytest.mark.parametrize("base, config, match", [([1.0], [1.0, 2.0], "same runs"), ([], [], "same runs"),
                                                 ([1.0], [0.0], "> 0")])
def test_run_ratios_refuse(bench, base, config, match):
    with pytest.raises(ValueError, match=match):
        bench.run_ratios(base, config)


def test_code_bytes_per_coded_token_excludes_the_open_group(bench):
    """kivi-4, 3 heads of 64, group 32, 55 tokens: 32 coded, 23 held uncoded. Per coded
    token and head (KIVI's layout): keys 64·4/8 = 32 B of codes + fp16 scale and zero per
    channel per 32 tokens (64·2·2/32 = 8 B); values 32 B + fp16 scale and zero per
    32-channel group (2·2·2 = 8 B): 80 B, 240 B for 3 heads."""
    from kvstats.models import QuantizedCache

    cache = QuantizedCache("kivi", 4, seed=0)
    cache.update(torch.randn(1, 3, 55, 64), torch.randn(1, 3, 55, 64), layer_idx=0)
    rep = cache.memory_report()
    n_coded = [lay.n_coded for lay in cache.layers]
    assert n_coded == [32] and rep["uncoded_tokens"] == 23
    assert bench.code_bytes_per_coded_token(rep["code_bytes"], n_coded) == 240.0
    assert rep["code_bytes"] / 55 < 240 * 0.6       # the old column: 140 B, 42 % low
    assert np.isnan(bench.code_bytes_per_coded_token(0, [0]))


def test_timed_runs_keep_every_runs_times(bench):
    """The per-run decode times come back in run order, their minimum the reported best."""
    from transformers import DynamicCache

    sys.path.insert(0, str(ROOT / "tests" / "models"))
    from _tiny_llama import tiny_llama

    model = tiny_llama(vocab=128, hidden=64, layers=2, heads=4, kv_heads=2, head_dim=32, max_positions=256)
    prompt = torch.randint(2, 128, (1, 48), generator=torch.Generator().manual_seed(3))
    makers = {"a": lambda: DynamicCache(config=model.config), "b": lambda: DynamicCache(config=model.config)}
    best = bench.timed_runs(model, prompt, makers, 3, 3)
    for name in makers:
        walls, cpus = best[name][5], best[name][6]
        assert len(walls) == len(cpus) == 3
        assert best[name][2] == min(walls) and best[name][4] == min(cpus)
    assert bench.run_ratios(best["a"][5], best["b"][5]).shape == (3,)
