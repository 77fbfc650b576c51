"""The benchmark scripts of experiments/ run end to end at a tiny size.

Each script checks its own outputs against its baseline in the run (bit-equal
reconstructions, identical p-values, identical tables) and stops with SystemExit when they
differ, so running it small is the test: a script that no longer runs, or whose check
fails, fails here. No timing is asserted (docs/benchmarks.md gives the measured ratios).
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_script(name: str, argv: list[str], monkeypatch, capsys) -> str:
    """Run experiments/<name> as __main__ with ``argv``; return what it printed."""
    monkeypatch.setattr(sys, "argv", [name, *argv])
    monkeypatch.syspath_prepend(str(ROOT / "experiments"))
    runpy.run_path(str(ROOT / "experiments" / name), run_name="__main__")
    return capsys.readouterr().out


def test_bench_quant_runs_every_registered_scheme(monkeypatch, capsys):
    """Every registry entry gets its two rows (the fixed-budget formats at their own budget:
    the script once stopped at q8_0 with 'bits ... must be None or 8')."""
    from kvstats.quant.registry import REGISTRY

    out = run_script("bench_quant.py", ["--vectors", "64", "--repeats", "1"], monkeypatch, capsys)
    names = [("K4V2" if n == "mixed" else n) for n in REGISTRY]
    for name in names:
        assert f"| {name} |" in out and f"| {name} roundtrip |" in out, name
    assert "skipped" not in out


def test_bench_metrics_times_and_checks_roundtrip(monkeypatch, capsys):
    out = run_script("bench_metrics.py", ["--trials", "3", "--chunk", "2", "--keys", "32",
                                          "--dim", "16", "--dtypes", "float32"],
                     monkeypatch, capsys)
    assert out.count("| float32 |") == 3 and "profile / roundtrip" in out


def test_bench_stats_p_values_identical(monkeypatch, capsys):
    out = run_script("bench_stats.py", ["--batch", "40", "--repeats", "1", "--pairs", "3"],
                     monkeypatch, capsys)
    assert out.count("True") == 4


def test_bench_metrics_digest_tells_arrays_apart():
    """bench_metrics compares roundtrip with the storage path by digest (so that neither's
    outputs are held while the other is timed): equal arrays, equal digests; one ulp, another
    dtype or another shape of the same bytes, different."""
    import numpy as np

    digest = runpy.run_path(str(ROOT / "experiments" / "bench_metrics.py"))["_digest"]
    a = np.random.default_rng(0).normal(size=(3, 4, 8))
    b = a.copy()
    assert digest(a, a[::2]) == digest(b, b[::2])
    b[1, 2, 3] = np.nextafter(b[1, 2, 3], np.inf)
    for other in (b, a.view(np.int64), a.reshape(4, 3, 8)):
        assert digest(other) != digest(a)


def test_bench_sequential_runs(monkeypatch, capsys):
    out = run_script("bench_sequential.py", ["--n", "8", "--family", "3", "--reps", "2"],
                     monkeypatch, capsys)
    assert "null" in out and "separated" in out


def test_bench_energy_paired_and_kvstats_only(monkeypatch, capsys):
    out = run_script("bench_energy.py", ["--paired", "--paired-m", "12", "--resamples", "19",
                                         "--repeats", "1"], monkeypatch, capsys)
    assert "both (statistics agree" in out
    out = run_script("bench_energy.py", ["--only-big", "--big-n", "30", "--big-resamples", "19"],
                     monkeypatch, capsys)
    assert "kvstats.stats.energy_test | 19 |" in out


def test_bench_energy_without_dcor_says_how_to_run(monkeypatch, capsys):
    """Without dcor the comparison stops with a message naming the package and the options
    that run without it (it was a bare ModuleNotFoundError)."""
    monkeypatch.setitem(sys.modules, "dcor", None)      # import dcor -> ModuleNotFoundError
    with pytest.raises(SystemExit, match="needs dcor.*--only-big and --paired"):
        run_script("bench_energy.py", ["--skip-big"], monkeypatch, capsys)


@pytest.mark.slow
def test_bench_compare_tables_identical(monkeypatch, capsys):
    """Needs git history (the old compare.py) and results/quick; ~20 s on 2 shared cores,
    so only at KVSTATS_TEST_SCALE=full (it stopped with 'the tables differ' once
    compare_schemes gained a column)."""
    from kvstats._checks import replicate_scale

    if replicate_scale() != "full":
        pytest.skip("~20 s: runs at KVSTATS_TEST_SCALE=full")
    if not (ROOT / "results" / "quick").is_dir():
        pytest.skip("results/quick is not in this checkout")
    out = run_script("bench_compare.py", ["--repeats", "1"], monkeypatch, capsys)
    assert "same arrays and layout: True" in out and "False" not in out


def test_bench_compare_same_table_allows_only_named_additions():
    """The identity check of bench_compare accepts what compare_schemes gained after the old
    revision (a NaN cell of FILLED_SINCE filled, a text cell of EXTENDED_SINCE extended after
    ': ') and counts it; any other difference fails it (the script stopped with 'the tables
    differ' once verdicts gained their reason)."""
    import numpy as np
    import pandas as pd

    same_table = runpy.run_path(str(ROOT / "experiments" / "bench_compare.py"))["same_table"]
    old = pd.DataFrame({"p": [0.1, np.nan], "n_informative": [np.nan, 5.0],
                        "verdict": ["a wins", "not resolvable at n = 9"]})
    new = old.assign(n_informative=[100.0, 5.0],
                     verdict=["a wins", "not resolvable at n = 9: only 3 of the 9 pairs differ"])
    assert same_table(old, new) == (True, 2)
    assert same_table(old, old) == (True, 0)
    for changed in (new.assign(n_informative=[100.0, 6.0]),           # a number that was there
                    new.assign(verdict=["b wins", new.verdict[1]]),     # another text
                    new.assign(verdict=["a wins", "not resolvable at n = 90"]),  # not after ': '
                    new.assign(p=[np.nextafter(0.1, 1.0), np.nan])):    # one ulp
        assert same_table(old, changed) == (False, 0)


def test_bench_sweep_reduced_grid_builds_without_warnings():
    """The reduced grid asks for no comparison pairs: the default pairs did not name its
    schemes (labelled with their norm_dtype), so every build warned that it had none."""
    import warnings

    bench = runpy.run_path(str(ROOT / "experiments" / "bench_sweep.py"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = bench["reduced_config"](4, 16, 1)
    assert cfg.comparisons == () and len(cfg.cells()) == 18


def test_bench_cache_quality_is_teacher_forced():
    """bench_cache's quality columns: every configuration fed the same tokens after the
    prompt (not its own argmax), each step compared with the base cache's distribution.
    Reference: one forward pass over prompt + tokens with no cache (the base) and through a
    fresh QuantizedCache (per-vector codes, window 0: a prefill codes every token before
    attention reads it, as decoding does), KL summed by scipy's rel_entr. Tiny random
    Llama, no download."""
    import numpy as np
    import torch
    from scipy.special import rel_entr
    from transformers import DynamicCache

    sys.path.insert(0, str(ROOT / "tests" / "models"))
    from _tiny_llama import tiny_llama

    from kvstats.models import QuantizedCache

    bench = runpy.run_path(str(ROOT / "experiments" / "bench_cache.py"))
    model = tiny_llama(vocab=128, hidden=64, layers=2, heads=4, kv_heads=2, head_dim=32, max_positions=256)
    gen = torch.Generator().manual_seed(3)
    prompt = torch.randint(2, 128, (1, 12), generator=gen)
    tokens = torch.randint(2, 128, (10,), generator=gen).tolist()  # not anyone's greedy choice
    makers = {"base": lambda: DynamicCache(config=model.config),
              "KQV-2": lambda: QuantizedCache("KQV", 2, seed=5)}
    out = bench["teacher_forced"](model, prompt, makers, tokens, "base")

    ids = torch.cat([prompt[0], torch.tensor(tokens)])[None, :-1]
    with torch.inference_mode():
        ref = torch.log_softmax(model(input_ids=ids).logits[0, 11:].double(), -1).numpy()
        quant = model(input_ids=ids, cache=QuantizedCache("KQV", 2, seed=5), use_cache=True).logits[0, 11:]
    quant = torch.log_softmax(quant.double(), -1).numpy()
    kl = rel_entr(np.exp(ref), np.exp(quant)).sum(-1).mean()
    np.testing.assert_array_equal(out["base"][0], ref.argmax(-1))
    assert out["base"][1] == 0.0
    np.testing.assert_array_equal(out["KQV-2"][0], quant.argmax(-1))
    assert kl > 1e-3 and out["KQV-2"][1] == pytest.approx(kl, rel=1e-4)


def test_bench_cache_equal_prefix():
    equal_prefix = runpy.run_path(str(ROOT / "experiments" / "bench_cache.py"))["equal_prefix"]
    assert [equal_prefix([1, 2, 3], b) for b in ([1, 2, 3], [1, 2, 4], [0, 2, 3])] == [3, 2, 0]


def _summary(held, bits=(2.0, None)):
    """Rows as real_e2e's summary CSV has them (one per configuration)."""
    import pandas as pd

    return pd.DataFrame({"scheme": ["KQV", "hf:fp8"], "bits": list(bits), "window": 0,
                         "mode": ["prefill", "decode"], "mean_kl": [0.123456789012, 0.5],
                         "bytes_per_token": [3420.0, 11522.0], "held_bytes_per_token": held,
                         "fixed_bytes": [2.15e6, 0.0]})


def test_real_e2e_replaces_only_the_given_columns(tmp_path, load_experiment):
    """replace_rows with some columns rewrites those fields of the matching rows and leaves
    every other field and line byte for byte (a whole-row rewrite would blank them)."""
    e2e = load_experiment("real_e2e")
    path = str(tmp_path / "e2e_summary.csv")
    _summary([20200.0, 11522.0]).to_csv(path, index=False)
    before = open(path).read().splitlines()
    new = _summary([7000.5, 11522.0]).assign(fixed_bytes=[1.55e6, 0.0])
    key = ["scheme", "bits", "window", "mode"]
    assert e2e.replace_rows(path, new[key + e2e.MEMORY_COLUMNS].iloc[:1], key) == 1
    after = open(path).read().splitlines()
    assert after[0] == before[0] and after[2] == before[2]
    assert after[1] == before[1].replace("20200.0,2150000.0", "7000.5,1550000.0") != before[1]


def test_real_e2e_only_memory(tmp_path, load_experiment, monkeypatch):
    """--only memory writes the memory columns of one text's run when every text gives the
    same, into e2e_summary.csv (other fields kept) or e2e_memory.csv; texts that differ, or
    stored bytes unlike the earlier run's, stop it."""
    import argparse

    import pandas as pd

    e2e = load_experiment("real_e2e")
    held = iter([[7000.5, 11522.0], [7000.5, 11522.0], [7000.5, 11522.0], [7000.5, 11522.0],
                 [7000.5, 11522.0], [7001.0, 11522.0]])
    seen = []

    def run_all(model, tok, texts, args):
        seen.append((texts, args.texts, args.kivi_texts, args.peer_texts))
        return pd.DataFrame()

    monkeypatch.setattr(e2e, "run_all", run_all)
    monkeypatch.setattr(e2e, "summarize_quality", lambda df: _summary(next(held)))
    args = argparse.Namespace(out=str(tmp_path), texts=2, kivi_texts=6, peer_texts=6)
    e2e.only_memory(args, None, None, ["a", "b", "c"])
    assert seen == [(["a"], 1, 1, 1), (["b"], 1, 1, 1)]
    assert list(pd.read_csv(tmp_path / "e2e_memory.csv").held_bytes_per_token) == [7000.5, 11522.0]
    _summary([20200.0, 11522.0]).to_csv(tmp_path / "e2e_summary.csv", index=False)
    e2e.only_memory(args, None, None, ["a", "b"])
    summary = pd.read_csv(tmp_path / "e2e_summary.csv")
    assert list(summary.held_bytes_per_token) == [7000.5, 11522.0] and summary.mean_kl[0] == 0.123456789012
    with pytest.raises(ValueError, match="texts \\[1\\] differ"):
        e2e.only_memory(args, None, None, ["a", "b"])
    monkeypatch.setattr(e2e, "summarize_quality", lambda df: _summary([1.0, 1.0]).assign(bytes_per_token=1.0))
    with pytest.raises(ValueError, match="stored bytes per token"):
        e2e.only_memory(args, None, None, ["a", "b"])
