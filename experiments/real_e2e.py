"""End-to-end quality of quantized KV caches on SmolLM2-135M-Instruct (llama.cpp KL mode).

Usage: .venv/bin/python experiments/real_e2e.py [--out results/real] [--texts 16] [--kivi-texts 6] [--peer-texts 6]
                                              [--tokens 128] [--threads 1] [--no-peers]
                                              [--only formats|kivi-qjl|memory]

Teacher-forced over the standard-library docstrings: every position's next-token
distribution with the quantized cache is compared with the full-precision (float32) one.
``mode="prefill"``: one pass through the quantized cache with window 0, every key and value
coded before attention reads it, with the same seeded randomness, as token-by-token decoding
codes it. For the per-vector schemes that is the same procedure as decoding but not
bit-equal to it (kvstats.models.quality): the float32 rounding of one pass over the text
differs from that of one-token steps (other matmul shapes, other summation orders), so a
later layer's key or value can land on the other side of a code boundary, and from there
the two runs are two different quantization noises. Per-position KL differs and the mean
moves (KQV@4 on 2 texts x 64 tokens: 0.113 in prefill, 0.103 decoded after a one-token
prefill; 2026-12-04), so a comparison across modes (the peers and KIVI rows, decoded,
against the prefill rows) carries this difference too. Coders with a statistic of
what one call codes (the fp8 formats' and nvfp4's per-head scale) and token-grouped ones
(qjl's 32-token groups; below) differ between the modes by more than rounding. Each text
gets its own draw of the schemes' randomness (seed = text index), shared by all schemes
(paired design).

``qjl@3`` (registry defaults: m = 3d sketch rows, no outlier channels, 3-bit per-token
values) runs with the others; ``qjl+o4@3`` (the same with 4 outlier channels per 32-token
group coded by a sketch of their own, as in the QJL paper) runs as a separate prefill
pass, since a configuration list shares one set of scheme parameters. ``qjl`` codes whole
32-token groups: in prefill a group's statistics (its outlier channels) come from all of
its tokens.

The caches transformers users run today (kvstats.models.peers; issue #14) run as peers,
token by token after a one-token prefill (their prefill attends the raw states: KL
exactly 0 there), on the first ``--peer-texts`` texts (the KIVI texts): ``hf:quanto-int4``
and ``hf:quanto-int2`` with residual 0 (every token quantized on arrival, as kvstats'
caches with window 0) and ``hf:quanto-int4/r128`` with transformers' defaults (residual
128, group 64, axis 0), ``hf:fp8`` (its per-tensor scale calibrated on the first token,
as token-by-token generation from a one-token prompt does) and ``hf:fp8/cal32`` (on a
32-token prefill). Every cache's memory is also measured by one generic walk of the cache
object (``held_bytes_per_token``: every tensor it holds, with the fixed rotations,
codebooks and sketches whose total is ``fixed_bytes``).

The formats inference engines deploy (issue #14; kvstats.quant.blockfmt, fp8, microscaling):
llama.cpp's ``q8_0``, ``q4_0``, ``q4_1``, ``q5_0``, ``q5_1``, vLLM's ``fp8_e4m3`` and
``fp8_e5m2`` (registry default: one oracle float32 scale per head, the amax of what one call
codes, i.e. of the whole text in prefill), ``mxfp4`` and ``nvfp4``, with ``turboquant_mse`` at
n = 4 and 8 and ``KQV@8`` as the kvstats schemes nearest in total bits, run on the same texts
in the same prefill mode. ``--only formats`` runs just these rows and appends them to the
existing positions and summary CSVs in ``--out`` (the existing lines are copied byte for
byte), so they need not rerun the rest. ``--only kivi-qjl`` reruns the kivi and qjl rows
(``kivi@2``, ``kivi@4``, ``qjl@3``, ``qjl+o4@3``) and replaces their rows in the three CSVs
in place (every other line byte for byte): their positions and summary rows and the qjl
equivalence rows. ``--only memory`` re-measures just the two memory columns
``held_bytes_per_token`` and ``fixed_bytes`` of every configuration (a full run's, each in
its own mode) on each of the first ``--texts`` texts alone (``--texts 2`` is enough: the
figures depend on the shapes and the 128 tokens, not on the text, and the run stops if two
texts give different ones); it replaces those two fields of every row of
``e2e_summary.csv`` in ``--out`` (every other field byte for byte; the stored
``bytes_per_token`` must be the earlier run's) or, without one, writes ``e2e_memory.csv``
there. ``klt`` is not run: the cache codes
it in whole blocks of ``group_size`` tokens (default 1024, more than a 128-token text, so
nothing would be coded), and a block that fits a text stores a float16 basis per half-block
that costs more bits per coordinate than the codes (docs/real_model.md).

Writes results/real/e2e_positions.csv.gz (one row per scheme, text, position),
results/real/e2e_summary.csv and results/real/e2e_tests.csv: the equivalence and
non-inferiority rows (``test`` = tost_ratio / tost_rank; kvstats.stats.equivalence, paired
over texts: the text is the unit), their margins in ``margin_low``/``margin_high``.
The difference tests (configuration a vs b, the main, peers and formats families) are not
made here: experiments/real_report.py computes them from e2e_positions.csv.gz
(``E2E_FAMILIES``: the exact sign test on per-text means matched by text, Holm per family),
so the positions are the one record and the tests one piece of code. Rows with an empty
``test`` in an e2e_tests.csv of an earlier run are the two-sample tests (Mann–Whitney,
Wilcoxon) this script wrote before 2026-12-01 (session 7); nothing reads them now.

Every run records what it ran on in ``e2e_runs.json`` in ``--out`` (a full run starts the
list, an ``--only`` run appends to it): the CPU, :func:`kvstats.sweep.numeric_env.numeric_env`
(BLAS and the kernels it chose), the thread count, the versions of Python, numpy, torch,
transformers and gguf, the git revision and the UTC start and end; experiments/real_report.py
states them under the end-to-end table. The record also holds the weights file
(``weights``: package, version, file name and SHA-256, as load_model read it).

Reruns are bit-identical on the same machine and installs: seeds are fixed and
kl_quality runs on ``--threads`` threads for torch and numpy's BLAS (default 1; the
count changes the rounding of GEMMs and large sums, and so the KL; see docs/real_model.md,
"Reproducibility").
"""

import argparse
import datetime
import gzip
import io
import json
import os
import platform
import time

import numpy as np
import pandas as pd
from kvstats.models import kl_quality, load_model, summarize_quality
from kvstats.models.texts import stdlib_texts
from kvstats.stats.equivalence import tost_rank, tost_ratio

CONFIGS = ([(s, n) for n in (2, 3, 4, 5) for s in ("KV", "KQV", "QKQV")]
           + [("K4V4", None), ("K4V2", None), ("K2V4", None), ("K3V3", None), ("qjl", 3), ("kivi", 2), ("kivi", 4)])
# (label, scheme, bits, parameters): configurations with their own scheme parameters.
PARAM_CONFIGS = [("qjl+o4", "qjl", 3, dict(n_outliers=4))]
# (label, peer, residual length, prefill tokens): transformers' caches, token by token.
PEER_CONFIGS = [("hf:quanto-int4", "hf:quanto-int4", 0, 1), ("hf:quanto-int2", "hf:quanto-int2", 0, 1),
                ("hf:quanto-int4/r128", "hf:quanto-int4", 128, 1), ("hf:fp8", "hf:fp8", 0, 1),
                ("hf:fp8/cal32", "hf:fp8", 0, 32)]
# The deployed formats (prefill, the per-vector rows' texts) and the kvstats rows nearest
# them in total bits (turboquant_mse@8 and KQV@8 exist only for the 8-bit formats; the pairs
# compared are experiments/real_report.py's E2E_FAMILIES["formats"]).
DEPLOYED = ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "fp8_e4m3", "fp8_e5m2", "mxfp4", "nvfp4")
FORMAT_CONFIGS = [(f, None) for f in DEPLOYED] + [("turboquant_mse", 4), ("turboquant_mse", 8), ("KQV", 8)]


def config_name(scheme, bits):
    """The ``config`` column's value of a (scheme or label, bits) row: ``scheme@bits``, or the
    scheme alone for configurations without a bit count."""
    return scheme if bits is None or pd.isna(bits) else f"{scheme}@{int(bits)}"


def config_names(peers=True):
    """Every ``config`` a full run writes to e2e_positions.csv.gz (``peers``: with
    transformers' caches, as without ``--no-peers``)."""
    names = [config_name(s, b) for s, b in CONFIGS + FORMAT_CONFIGS]
    names += [config_name(label, bits) for label, _, bits, _ in PARAM_CONFIGS]
    return names + ([label for label, *_ in PEER_CONFIGS] if peers else [])


def per_text(df, config, column):
    """Per-text mean of ``column`` for one config, ordered by text (the paired unit)."""
    return df[df.config == config].groupby("text")[column].apply(lambda v: v.astype(float).mean()).sort_index()


def noninferiority(df, a, b, column, margin, alternative, claim):
    """Paired (over texts) ratio and rank non-inferiority rows of config a against b."""
    x, y = per_text(df, a, column), per_text(df, b, column)
    x, y = x.align(y, join="inner")
    rows = []
    for res in (tost_ratio(x.to_numpy(), y.to_numpy(), margin=margin, alternative=alternative, paired=True),
                tost_rank(x.to_numpy(), y.to_numpy(), delta=0.1, alternative=alternative, paired=True)):
        rows.append(dict(a=a, b=b, unit="text", n=len(x), metric=column, claim=claim, test=res.test,
                         alternative=alternative, estimate=res.estimate, ci_low=res.low, ci_high=res.high,
                         margin_low=res.margin_low, margin_high=res.margin_high, tost_p=res.pvalue,
                         within_margin=res.within_margin, p_difference=res.pvalue_difference,
                         method=res.method, mean_a=x.mean(), mean_b=y.mean()))
    return rows


def run(model, tok, texts, configs, tokens, label, threads=1, **kw):
    """kl_quality text by text (seed = text index, as one call would use), with progress."""
    frames, memory = [], {}
    for i, text in enumerate(texts):
        t0 = time.time()
        df = kl_quality(model, tok, [text], configs, seed=i, max_tokens=tokens, threads=threads, **kw)
        df["text"] = i
        frames.append(df)
        for key, figures in df.attrs["memory"].items():
            memory.setdefault(key, []).append(figures)
        print(f"{label}: text {i + 1}/{len(texts)} in {time.time() - t0:.0f} s", flush=True)
    out = pd.concat(frames, ignore_index=True)
    out.attrs["memory"] = {k: tuple(np.mean(v, axis=0)) for k, v in memory.items()}
    return out


def run_formats(model, tok, texts, tokens, threads):
    """The deployed formats and their kvstats neighbours: one prefill pass per text, as the
    per-vector rows (seed = text index), with the ``config`` column."""
    df = run(model, tok, texts, FORMAT_CONFIGS, tokens, "formats", threads=threads)
    df["config"] = [config_name(s, b) for s, b in zip(df.scheme, df.bits)]
    return df


def qjl_equivalence(df):
    """QJL's "no loss at 3 bits" rows for qjl@3 and the PARAM_CONFIGS: top-1 agreement with
    fp32 (which agrees with itself: 1) > 0.98 and per-text NLL ratio to fp32 < 1.02."""
    rows = []
    for q in ["qjl@3"] + [f"{label}@{bits}" for label, _, bits, _ in PARAM_CONFIGS]:
        fp = df[df.config == q].assign(config="fp32", top1_agree=1.0, nll_quant=df.nll_ref)
        both = pd.concat([df[df.config == q], fp], ignore_index=True)
        rows += noninferiority(both, q, "fp32", "top1_agree", (0.98, 1.02), "greater",
                               f"{q}: top-1 agreement with fp32 >= 98%")
        rows += noninferiority(both, q, "fp32", "nll_quant", (1 / 1.02, 1.02), "less",
                               f"{q}: NLL within 2% of fp32")
    return rows


def kivi_and_param_frames(model, tok, texts, args):
    """KIVI through the cache, token by token after a 32-token prefill on ``--kivi-texts``
    texts (keys per channel over groups of 32 tokens, the incomplete last group and a
    32-token window kept in full precision: KIVI's defaults; slower, so fewer texts), then
    the PARAM_CONFIGS in prefill: their frames and memory figures, in the run's order."""
    kivi = run(model, tok, texts[:args.kivi_texts], [c for c in CONFIGS if c[0] == "kivi"], args.tokens,
               "kivi", threads=args.threads, window=32, mode="decode", prefill_tokens=32)
    frames, memory = [kivi], dict(kivi.attrs["memory"])
    for label, scheme, bits, params in PARAM_CONFIGS:
        extra = run(model, tok, texts[:args.texts], [(scheme, bits)], args.tokens, label,
                    threads=args.threads, **params)
        extra["scheme"] = label
        memory[f"{label}:{bits}"] = extra.attrs["memory"][f"{scheme}:{bits}"]
        frames.append(extra)
    return frames, memory


def run_kivi_qjl(model, tok, texts, args):
    """The kivi and qjl rows as the full run makes them: ``qjl@3`` in prefill on ``--texts``
    texts, KIVI token by token after a 32-token prefill on ``--kivi-texts`` texts, and the
    PARAM_CONFIGS (``qjl+o4@3``) in prefill. Each cache is seeded ``seed + text index`` on
    its own, so running them apart from the other configurations draws the same codes."""
    qjl = run(model, tok, texts[:args.texts], [c for c in CONFIGS if c[0] == "qjl"], args.tokens, "qjl",
              threads=args.threads)
    frames, memory = kivi_and_param_frames(model, tok, texts, args)
    memory = {**qjl.attrs["memory"], **memory}
    df = pd.concat([qjl, *frames], ignore_index=True)
    df.attrs["memory"] = memory
    df["config"] = [config_name(s, b) for s, b in zip(df.scheme, df.bits)]
    return df


def _read_text_frame(path):
    """A CSV as strings, exactly as written (``to_csv`` of it gives the file back byte for byte)."""
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def _as_text_frame(new, header):
    """``new`` serialised as the CSVs are (pandas ``to_csv``) and read back as strings."""
    extra = sorted(set(new.columns) - set(header))
    if extra:
        raise ValueError(f"columns {extra} of the new rows are not in the header {header}")
    return pd.read_csv(io.StringIO(new.reindex(columns=header).to_csv(index=False)), dtype=str,
                       keep_default_na=False)


def replace_rows(path, new, key):
    """Replace, in place and in the file's order, the fields of ``new``'s columns in the rows
    of the CSV ``path`` whose ``key`` columns match a row of ``new`` (whole rows when
    ``new`` has every column); every other field and line is written back byte for byte.
    The old and new rows must have the same set of keys (a rerun of the same rows)."""
    opener = gzip.open if path.endswith(".gz") else open
    old = _read_text_frame(path)
    header = list(old.columns)
    if old.to_csv(index=False) != opener(path, "rt", newline="").read():
        raise ValueError(f"{path} does not round-trip through pandas as text; refusing to rewrite it")
    columns = [c for c in header if c in new.columns]
    fresh = _as_text_frame(new, header).set_index(key)
    if not fresh.index.is_unique:
        raise ValueError(f"{path}: the new rows repeat a key {key}")
    at = old.set_index(key).index
    hit = at.isin(fresh.index)
    if hit.sum() != len(fresh):
        raise ValueError(f"{path}: {len(fresh)} new rows but {int(hit.sum())} old rows with their keys {key}")
    out = old.copy()
    out.loc[hit, columns] = fresh.reindex(at[hit]).reset_index()[columns].to_numpy()
    with opener(path, "wt", newline="") as f:
        f.write(out.to_csv(index=False))
    return int(hit.sum())


def only_kivi_qjl(args, model, tok, texts):
    """``--only kivi-qjl``: rerun the kivi and qjl rows (kivi@2, kivi@4, qjl@3 and the
    PARAM_CONFIGS) and replace their old rows in the CSVs in ``args.out``: positions, summary
    and the qjl equivalence rows (the difference tests, the peers family's kivi@2 pair
    among them, are experiments/real_report.py's, from the positions)."""
    paths = {k: os.path.join(args.out, f"e2e_{k}") for k in ("positions.csv.gz", "summary.csv", "tests.csv")}
    missing = [p for p in paths.values() if not os.path.exists(p)]
    if missing:
        raise ValueError(f"--only kivi-qjl replaces rows of an earlier run's CSVs; missing: {missing}")
    old = pd.read_csv(paths["positions.csv.gz"])
    new = run_kivi_qjl(model, tok, texts, args)
    # The float32 reference of the new passes must be the earlier run's, position for position.
    key = ["config", "text", "position"]
    ref = old.set_index(key).nll_ref.reindex(new.set_index(key).index)
    if ref.isna().any() or not np.array_equal(ref.to_numpy(), new.nll_ref.to_numpy()):
        raise ValueError("the float32 reference (or the set of positions) differs from the earlier run's "
                         "(library, threads or installs changed): rerun everything instead")
    summary = summarize_quality(new)
    both = pd.concat([old[~old.config.isin(set(new.config))], new], ignore_index=True)
    equiv = pd.DataFrame(qjl_equivalence(both))
    changed = dict(positions=replace_rows(paths["positions.csv.gz"], new, key),
                   summary=replace_rows(paths["summary.csv"], summary, ["scheme", "bits", "window", "mode"]),
                   equivalence=replace_rows(paths["tests.csv"], equiv, ["a", "b", "metric", "test"]))
    print(f"rows replaced: {changed}", flush=True)
    return summary, equiv


def append_rows(path, new):
    """Append ``new`` to the CSV ``path`` (gzip if it ends .gz) in its header's column order,
    copying the existing lines byte for byte (their numbers are not re-parsed)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        text = f.read()
    header = text.split("\n", 1)[0].split(",")
    extra = sorted(set(new.columns) - set(header))
    if extra:
        raise ValueError(f"{path}: columns {extra} of the new rows are not in its header {header}")
    buf = io.StringIO()
    new.reindex(columns=header).to_csv(buf, index=False, header=False)
    with opener(path, "wt", newline="") as f:
        f.write(text if text.endswith("\n") else text + "\n")
        f.write(buf.getvalue())


def only_formats(args, model, tok, texts):
    """``--only formats``: run the format rows and append them to the positions and summary
    CSVs in ``args.out`` (their tests are experiments/real_report.py's, from the positions)."""
    paths = {k: os.path.join(args.out, f"e2e_{k}") for k in ("positions.csv.gz", "summary.csv")}
    missing = [p for p in paths.values() if not os.path.exists(p)]
    if missing:
        raise ValueError(f"--only formats appends to an earlier run's CSVs; missing: {missing}")
    old = pd.read_csv(paths["positions.csv.gz"])
    done = sorted(set(old.config) & {config_name(s, b) for s, b in FORMAT_CONFIGS})
    if done:
        raise ValueError(f"{paths['positions.csv.gz']} already holds the format rows {done}")
    new = run_formats(model, tok, texts[:args.texts], args.tokens, args.threads)
    # The float32 reference of the new pass must be the earlier run's, position for position.
    ref = old[old["mode"] == "prefill"].drop_duplicates(["text", "position"]).set_index(["text", "position"]).nll_ref
    mine = new.drop_duplicates(["text", "position"]).set_index(["text", "position"]).nll_ref
    same = ref.reindex(mine.index)
    if not np.array_equal(same.to_numpy(), mine.to_numpy()):
        raise ValueError("the float32 reference differs from the earlier run's (library, threads or "
                         "installs changed): rerun everything instead of appending")
    summary = summarize_quality(new)
    append_rows(paths["positions.csv.gz"], new)
    append_rows(paths["summary.csv"], summary)
    return summary, pd.DataFrame()


def run_all(model, tok, texts, args):
    """Every configuration of a full run, in its order and mode (per-vector in prefill on
    ``--texts`` texts, kivi and the PARAM_CONFIGS, the peers unless ``--no-peers``, the
    formats): the positions frame with the ``config`` column and ``attrs["memory"]``."""
    df = run(model, tok, texts[:args.texts], [c for c in CONFIGS if c[0] != "kivi"], args.tokens, "per-vector",
             threads=args.threads)
    frames, memory = kivi_and_param_frames(model, tok, texts, args)
    memory = {**df.attrs["memory"], **memory}
    frames = [df, *frames]
    if not args.no_peers:
        for label, name, residual, prefill in PEER_CONFIGS:
            extra = run(model, tok, texts[:args.peer_texts], [(name, None)], args.tokens, label,
                        threads=args.threads, window=residual, mode="decode", prefill_tokens=prefill)
            extra["scheme"] = label
            memory[f"{label}:None"] = extra.attrs["memory"][f"{name}:None"]
            frames.append(extra)
    formats = run_formats(model, tok, texts[:args.texts], args.tokens, args.threads)
    memory.update(formats.attrs["memory"])
    frames.append(formats.drop(columns="config"))
    df = pd.concat(frames, ignore_index=True)
    df.attrs["memory"] = memory
    df["config"] = [config_name(s, b) for s, b in zip(df.scheme, df.bits)]
    return df


MEMORY_COLUMNS = ["held_bytes_per_token", "fixed_bytes"]


def only_memory(args, model, tok, texts):
    """``--only memory``: every configuration's held and fixed bytes, measured by a run of
    :func:`run_all` on each of the first ``--texts`` texts alone (they must agree), written
    into the two columns of ``e2e_summary.csv`` in ``args.out`` (or ``e2e_memory.csv``)."""
    key = ["scheme", "bits", "window", "mode"]
    one = argparse.Namespace(**{**vars(args), "texts": 1, "kivi_texts": 1, "peer_texts": 1})
    runs = [summarize_quality(run_all(model, tok, [text], one)) for text in texts[:args.texts]]
    cols = key + ["bytes_per_token", *MEMORY_COLUMNS]
    differ = [i for i, r in enumerate(runs) if not r[cols].equals(runs[0][cols])]
    if differ:
        raise ValueError(f"the memory figures of texts {differ} differ from text 0's: they depend on the "
                         f"text, so one text's cannot stand for all")
    summary = runs[0][cols]
    path = os.path.join(args.out, "e2e_summary.csv")
    if not os.path.exists(path):
        summary.to_csv(os.path.join(args.out, "e2e_memory.csv"), index=False)
        print(f"{path} not found: wrote e2e_memory.csv", flush=True)
        return summary, pd.DataFrame()
    old = pd.read_csv(path).set_index(key)
    stored = old.bytes_per_token.reindex(summary.set_index(key).index)
    if not np.allclose(stored.to_numpy(), summary.bytes_per_token.to_numpy(), rtol=1e-12):
        raise ValueError(f"{path}: the stored bytes per token (or the set of rows) differ from this run's: "
                         f"other configurations or accounting; rerun everything instead")
    print(f"rows updated: {replace_rows(path, summary[key + MEMORY_COLUMNS], key)}", flush=True)
    return summary, pd.DataFrame()


def run_record(what: str, threads: int, started: float, weights: dict | None = None) -> dict:
    """What a run of this script ran on and when (one entry of ``e2e_runs.json``), with the
    weights file it ran (``weights``: load_model's ``model._kvstats_weights``, its package,
    version, file and SHA-256; None for a model loaded otherwise)."""
    import gguf
    import torch
    import transformers
    from kvstats.models.kv_capture import capture_env
    from kvstats.sweep.numeric_env import numeric_env

    def utc(t: float) -> str:
        return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

    env = capture_env(None, 1)   # the CPU and the checkout as a capture records them
    rev = env["kvstats_revision"]   # None outside a checkout; dirty None: unknown
    revision = "unknown" if rev is None else rev["revision"] + {True: "+edits", None: "+edits?"}.get(rev["dirty"], "")
    return {"run": what, "started": utc(started), "finished": utc(time.time()), "revision": revision,
            "cpu": env["cpu"], **numeric_env(), "threads": threads, "python": platform.python_version(),
            "numpy": np.__version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "gguf": getattr(gguf, "__version__", "unknown"),
            "weights": None if weights is None else dict(weights)}


def record_run(out: str, record: dict, append: bool) -> None:
    """Write ``record`` as the only entry of ``out``/e2e_runs.json, or append it (an
    ``--only`` run changes some rows of a full run's files; a missing or unreadable list
    starts anew)."""
    path = os.path.join(out, "e2e_runs.json")
    runs = []
    if append and os.path.exists(path):
        try:
            with open(path) as f:
                runs = json.load(f)
        except ValueError:
            runs = []
    with open(path, "w") as f:
        json.dump([*runs, record] if isinstance(runs, list) else [record], f, indent=1)
        f.write("\n")


def main() -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="results/real")
    ap.add_argument("--texts", type=int, default=16)
    ap.add_argument("--kivi-texts", type=int, default=6)
    ap.add_argument("--peer-texts", type=int, default=6,
                    help="texts for transformers' caches (token by token; the first, as KIVI's)")
    ap.add_argument("--no-peers", action="store_true", help="skip transformers' caches")
    ap.add_argument("--only", choices=["formats", "kivi-qjl", "memory"],
                    help="formats: run only the deployed formats' rows and append them to the CSVs in "
                         "--out; kivi-qjl: rerun only the kivi and qjl rows and replace theirs there; "
                         "memory: re-measure only the held and fixed bytes (on each of --texts texts)")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch and BLAS threads (default 1: the published numbers; another count "
                         "gives other roundings, reproducible only at that count)")
    args = ap.parse_args()
    if args.threads < 1:
        ap.error(f"--threads must be >= 1; received {args.threads}")
    # The same count outside kl_quality (model loading). One is also the fast choice on a
    # loaded 2-core machine: a second OpenMP thread per small op costs more than it saves
    # (one-token decode steps measured 30x slower with two).
    torch.set_num_threads(args.threads)
    print(f"load average {os.getloadavg()[0]:.2f}, threads {args.threads}", flush=True)
    t0 = time.time()
    what = "full" if args.only is None else f"--only {args.only}"
    model, tok = load_model()
    # load_model warns only when the file's hash differs from the pinned one: record it
    weights = getattr(model, "_kvstats_weights", None)
    texts = stdlib_texts()
    os.makedirs(args.out, exist_ok=True)
    if args.only is not None:
        only = {"formats": only_formats, "kivi-qjl": only_kivi_qjl, "memory": only_memory}[args.only]
        summary, tests = only(args, model, tok, texts)
        pd.set_option("display.width", 200)
        shown = ["scheme", "bits", "n_texts", "mean_kl", "se_kl_text", "top1_agreement", "bytes_per_token",
                 "held_bytes_per_token", "fixed_bytes"]
        print(summary[[c for c in shown if c in summary.columns]].to_string())
        if len(tests):
            print(tests.dropna(axis=1, how="all").to_string())
        print("difference tests: python experiments/real_report.py (from e2e_positions.csv.gz)")
        record_run(args.out, run_record(what, args.threads, t0, weights), append=True)
        print(f"done in {time.time() - t0:.0f} s (load average {os.getloadavg()[0]:.2f})")
        return
    df = run_all(model, tok, texts, args)
    df.to_csv(os.path.join(args.out, "e2e_positions.csv.gz"), index=False)
    summary = summarize_quality(df)
    summary.to_csv(os.path.join(args.out, "e2e_summary.csv"), index=False)
    # Equivalence / non-inferiority (the "≈" claims), paired over texts. Hariri et al.'s
    # "K4V2 keeps ~98% of K4V4": top-1 agreement ratio > 0.98 and KL ratio < 1.10; QJL's
    # "no loss at 3 bits": top-1 agreement with fp32 (which agrees with itself: 1) > 0.98
    # and per-text NLL ratio to fp32 < 1.02.
    equiv = (noninferiority(df, "K4V2", "K4V4", "top1_agree", (0.98, 1.02), "greater", "K4V2 keeps 98% of K4V4")
             + noninferiority(df, "K4V2", "K4V4", "kl", (1 / 1.1, 1.1), "less", "K4V2 KL within 10% of K4V4"))
    equiv += qjl_equivalence(df)
    tests = pd.DataFrame(equiv)
    tests.to_csv(os.path.join(args.out, "e2e_tests.csv"), index=False)
    pd.set_option("display.width", 200)
    print(summary[["scheme", "bits", "window", "n_texts", "mean_kl", "se_kl_text", "p99_kl", "max_kl",
                   "top1_agreement", "ppl_ratio", "bytes_per_token", "held_bytes_per_token",
                   "fixed_bytes"]].to_string())
    print(tests.dropna(axis=1, how="all").to_string())
    print("difference tests: python experiments/real_report.py (from e2e_positions.csv.gz)")
    record_run(args.out, run_record(what, args.threads, t0, weights), append=False)
    print(f"done in {time.time() - t0:.0f} s (load average {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
