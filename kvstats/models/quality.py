"""End-to-end quality of a quantized KV cache, as llama.cpp's KL-divergence mode reports it.

The full-precision model (float32 ``DynamicCache``) and the same model reading its keys
and values from a :class:`~kvstats.models.QuantizedCache` see the same token stream
(teacher forcing); at every position the next-token distributions are compared:
``KL(p_ref || p_quant)``, top-1 agreement, and the log-likelihood of the true next token
(perplexity).

Two ways to run the quantized model, both teacher-forced:

- ``mode="prefill"``: one forward pass over the whole text through the quantized cache.
  Every key and value is coded before attention reads it, so for per-vector schemes with
  ``window=0`` it is the quantizer token-by-token decoding applies, in one pass (what
  llama.cpp's perplexity/KL mode does), but not bit-equal to it: float32 rounding of a
  batched pass differs, a later layer's key can land across a code boundary, and from
  there the two are two equally valid quantization noises (per-position KL differs; the
  first positions agree to float tolerance and the mean damage is of the same size:
  ``tests/models/test_quantized_model.py``). Compare schemes within one mode.
- ``mode="decode"``: a prefill of ``prefill_tokens`` tokens, then one token at a time, so
  a full-precision window and token-grouped schemes (KIVI) behave as in generation.
  Only positions from ``prefill_tokens`` on are predicted by a decode step: texts with
  no such position (at most ``prefill_tokens + 1`` tokens) are refused when all are,
  and named in a warning when some are.

A full-precision ``window`` is relative to the position being predicted, which only a
token-by-token pass has: one prefill pass keeps the text's *last* ``window`` tokens in
full precision for every position (its first positions read coded keys that generation
reads in full precision), so ``window > 0`` needs ``mode="decode"`` (a ValueError
otherwise). Token-grouped schemes (kivi, qjl, klt) with ``window=0`` stay allowed in
prefill: a one-pass prefill of a prompt codes its whole groups, each group's statistics
from all of its tokens (experiments/real_e2e.py's ``qjl@3`` rows); compare them with
decode-mode rows only as two protocols.

The caches transformers users run today are accepted by name beside the kvstats schemes
(``"hf:quanto-int4"``, ``"hf:quanto-int2"``, ``"hf:fp8"``; :mod:`kvstats.models.peers`).
Their prefill attends the raw states, so they run with ``mode="decode"`` only, and the
positions of their prefill chunk are exact (KL 0) where kvstats' cache codes them: the
default prefill is then one token, and a list mixing peers with kvstats schemes refuses
a longer one (one call, one set of positions coded for every configuration). The
``window`` is their residual length. Every cache's memory is also measured by one generic
walk (:func:`kvstats.models.peers.held_bytes`: every tensor the cache object holds).

Reruns are bit-identical: the scheme's randomness is seeded (``seed + text index``, then
per layer and head inside :class:`~kvstats.models.QuantizedCache`), and the computation
runs on ``threads`` threads (1 by default) for torch *and* numpy's BLAS. The thread count
matters: MKL's GEMM (torch's few-token matmuls, e.g. the MLP down-projection of a short
chunk), OpenBLAS's GEMM (the numpy coders' rotations of float32 keys) and torch's sums to
a single value over more than 32768 elements all split their work, and so round,
differently with 1 and 2 threads; a rounding difference that flips one code on a
boundary changes the KL (measured: KQV at 4 bits on four texts, 0.1099 with one OpenBLAS
thread and 0.1114 with two, before issue #15). What still varies across machines and
installs is listed in docs/real_model.md ("Reproducibility").
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pandas as pd

from kvstats._checks import check_choice, check_int
from kvstats.models.peers import is_peer, make_peer_cache, memory_held
from kvstats.models.texts import check_context, check_distinct

MODES = ("prefill", "decode")


@contextmanager
def pinned_threads(threads: int | None) -> Iterator[None]:
    """Run torch's intra-op ops and numpy's BLAS on exactly ``threads`` threads, restored on exit.

    The thread count changes how MKL/OpenBLAS GEMMs and torch's large single-output sums
    split their work, hence their float rounding (see the module docstring); pinning it
    makes a computation's numbers independent of the machine's core count and of
    ``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS``. ``None`` changes nothing.

    Examples
    --------
    >>> import torch
    >>> from kvstats.models import pinned_threads
    >>> before = torch.get_num_threads()
    >>> with pinned_threads(1):
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == before
    True
    """
    if threads is None:
        yield
        return
    threads = check_int(threads, "threads", low=1)
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads, user_api="blas"):
            yield
    finally:
        torch.set_num_threads(before)


def _token_ids(tokenizer, texts, max_tokens, context):
    if isinstance(texts, str) or not hasattr(texts, "__len__") or len(texts) == 0:
        raise TypeError(f"texts must be a non-empty list of strings; received {texts!r:.80}")
    out = []
    for i, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise TypeError(f"texts must be non-empty strings; item {i} is {text!r:.80}")
        ids = list(tokenizer(text, add_special_tokens=True)["input_ids"])
        if max_tokens is not None:
            ids = ids[:max_tokens]
        if len(ids) < 2:
            raise ValueError(f"texts must have at least 2 tokens; text {i} has {len(ids)}")
        out.append(ids)
    check_context([len(ids) for ids in out], context, "texts", f"pass max_tokens <= {context}")
    what = "texts" if max_tokens is None else f"texts (each truncated to max_tokens={max_tokens})"
    check_distinct(out, what)
    return out


def _log_probs(model, ids, cache, mode, prefill_tokens):
    import torch

    x = torch.tensor([ids], dtype=torch.long)
    with torch.inference_mode():
        if mode == "prefill" or cache is None:
            logits = model(input_ids=x, cache=cache, use_cache=cache is not None).logits[0]
        else:
            p = min(prefill_tokens, len(ids))
            chunks = [model(input_ids=x[:, :p], cache=cache, use_cache=True).logits[0]]
            for t in range(p, len(ids)):
                chunks.append(model(input_ids=x[:, t:t + 1], cache=cache, use_cache=True).logits[0])
            logits = torch.cat(chunks, dim=0)
        return torch.log_softmax(logits.double(), dim=-1)


def kl_quality(model, tokenizer, texts, scheme, bits=None, *, seed=0, window=0, mode="prefill",
               prefill_tokens=None, max_tokens=None, threads: int | None = 1,
               progress: bool = True, **scheme_params) -> pd.DataFrame:
    """Per-position comparison of the quantized-cache model with the full-precision one.

    Parameters
    ----------
    model, tokenizer
        From :func:`kvstats.models.load_model`.
    texts : list of str
        Each text is one teacher-forced stream (truncated to ``max_tokens`` if given).
    scheme : str or list of (str, int or None)
        A :data:`kvstats.SCHEMES` name, ``"K{a}V{b}"`` or a transformers peer
        (:data:`kvstats.models.peers.PEERS`: ``"hf:quanto-int4"``, ``"hf:quanto-int2"``,
        ``"hf:fp8"``; bits None, ``mode="decode"`` only); or a list of ``(scheme, bits)``
        pairs, all compared against one full-precision pass per text (``bits`` must then
        be None).
    bits : int or None
        Budget in bits per coordinate (None for identity / mixed names / peers).
    seed, window, **scheme_params
        Passed to :class:`~kvstats.models.QuantizedCache` (a fresh cache per text, seeded
        ``seed + text index`` so texts are independent draws of the scheme's randomness);
        for a peer, ``window`` is its ``residual_length`` and ``scheme_params`` its
        quanto options (:func:`kvstats.models.peers.make_peer_cache`). ``window > 0``
        needs ``mode="decode"`` (module docstring); with ``prefill_tokens`` > ``window``
        the prefill chunk's own positions read it as one pass does, so
        ``prefill_tokens=1`` gives generation's window at every position.
    mode : {"prefill", "decode"}
        See the module docstring.
    prefill_tokens : int, optional
        Prompt tokens processed at once before decoding (``mode="decode"``). Default: 16,
        or 1 when a configuration is a transformers peer. Rows of positions below it come
        from the prefill chunk: a text of at most ``prefill_tokens + 1`` tokens has no row
        from a decode step (refused when every text is so short, a warning naming them
        when some are). A peer's prefill chunk attends
        its raw states, so its first ``prefill_tokens`` positions are exact (KL 0) while
        kvstats' cache codes them: beside kvstats schemes in one list a peer needs
        ``prefill_tokens=1`` (a larger value is refused); a list of peers alone may take
        more (e.g. to calibrate fp8's scale on a longer prompt), and its first
        ``prefill_tokens`` positions are then exact for every row. With one token,
        position 0 reads its own raw key and value: quanto's decode steps read the
        current token raw too, fp8's code it (one exact position per text for fp8).
    max_tokens : int, optional
        Truncate every text to this many tokens.
    threads : int or None
        Threads for torch and numpy's BLAS during the call (:func:`pinned_threads`,
        restored after). The default 1 makes reruns bit-identical whatever the machine's
        core count and thread settings (and is the faster choice on a loaded 2-core
        machine); a larger count is faster on an idle many-core machine and reproducible
        only at that same count; None leaves the current settings.
    progress : bool
        A progress bar (stderr) over the (text, configuration) runs; decoding token by
        token takes minutes on a CPU.

    Returns
    -------
    pandas.DataFrame
        One row per (text, position) predicting the next token, positions ``0..n-2``:
        ``scheme, bits, window, mode, text, position, kl, top1_ref, top1_quant,
        top1_agree, nll_ref, nll_quant``; ``attrs["memory"]`` maps ``"scheme:bits"`` to
        (stored bytes per token, fp16 bytes per token, held bytes per token, fixed
        bytes, uncoded share), means over texts (and, for a single scheme, ``attrs["bytes_per_token"]``,
        ``attrs["fp16_bytes_per_token"]``). Stored: kvstats' accounting (codes + tail;
        for a peer, what it holds); held: :func:`kvstats.models.peers.held_bytes` of the
        cache after the text, divided by its tokens (every tensor it holds, with unused
        buffer capacity and fixed rotations/codebooks: the same walk for every cache);
        fixed: the part of held that does not grow with the sequence (rotations,
        codebooks, sketches; 0 for a peer); uncoded share: ``memory_report``'s share of the held
        tokens kept in full precision beyond ``window`` after the text (a token-grouped
        scheme's open group: klt's tokens short of its block; a share near 1 measures the
        unquantized model; NaN for a peer).
        Summarize with :func:`summarize_quality`.

    Raises
    ------
    ValueError
        Unknown scheme or mode, ``window > 0`` with ``mode="prefill"``, ``mode="decode"``
        with every text at most ``prefill_tokens + 1`` tokens (no decode step would make
        a row), texts longer than the model's context, texts repeated
        (after truncation: each is an independent unit of ``se_kl_text``), ``threads`` <
        1, a ``(scheme, bits)`` pair listed twice; a peer with ``mode="prefill"``, with
        ``bits``, beside a kvstats scheme with ``prefill_tokens`` > 1, or without
        optimum-quanto installed.

    Examples
    --------
    >>> from kvstats.models import load_model, kl_quality, summarize_quality
    >>> model, tok = load_model()                                          # doctest: +SKIP
    >>> df = kl_quality(model, tok, ["The quick brown fox."], "KQV", 4)    # doctest: +SKIP
    >>> summarize_quality(df)[["mean_kl", "top1_agreement"]]               # doctest: +SKIP
    """
    mode = check_choice(mode, "mode", MODES)
    window = check_int(window, "window", low=0)
    if window > 0 and mode == "prefill":
        # one pass keeps the text's last tokens in full precision for every position,
        # not the last tokens before each position: rows labelled with a window they did not have
        raise ValueError(f"window must be 0 with mode='prefill' (a full-precision window follows the "
                         f"predicted position only token by token: one pass keeps the text's last "
                         f"{window} tokens in full precision for every position); received "
                         f"window={window}, mode='prefill': use mode='decode' (prefill_tokens=1 for "
                         f"the window at every position)")
    if prefill_tokens is not None:
        prefill_tokens = check_int(prefill_tokens, "prefill_tokens", low=1)
    seed = check_int(seed, "seed", low=0)
    if threads is not None:
        threads = check_int(threads, "threads", low=1)
    if not isinstance(progress, bool):
        raise TypeError(f"progress must be True or False; received {progress!r}")
    if max_tokens is not None:
        max_tokens = check_int(max_tokens, "max_tokens", low=2)
    if isinstance(scheme, str):
        configs = [(scheme, bits)]
    elif isinstance(scheme, (list, tuple)) and scheme and all(
            isinstance(c, (list, tuple)) and len(c) == 2 and isinstance(c[0], str) for c in scheme):
        if bits is not None:
            raise ValueError(f"bits must be None when scheme is a list of (scheme, bits) pairs; received {bits!r}")
        configs = [tuple(c) for c in scheme]
        repeated = [c for i, c in enumerate(configs) if c in configs[:i]]
        if repeated:
            # the same seeded runs twice: summarize_quality pooled them into one row of doubled
            # positions (its standard errors too small) and attrs["memory"] kept one entry
            raise ValueError(f"scheme must list each (name, bits) pair once; received {repeated} more than once")
    else:
        raise TypeError(f"scheme must be a scheme name or a non-empty list of (name, bits) pairs; "
                        f"received {scheme!r:.80}")
    for name, b in configs:  # validate every configuration before the first forward pass
        if is_peer(name) and mode != "decode":
            raise ValueError(f"mode must be 'decode' for the transformers peer {name!r}: its one-pass "
                             f"prefill attends the raw states (KL exactly 0); received mode={mode!r}")
        _make_cache(model.config, name, b, seed, window, scheme_params)
    peers = [name for name, _ in configs if is_peer(name)]
    if prefill_tokens is None:
        prefill_tokens = 1 if peers else 16
    elif peers and len(peers) < len(configs) and prefill_tokens > 1:
        raise ValueError(f"prefill_tokens must be 1 when transformers peers {peers} run beside kvstats "
                         f"schemes: a peer's prefill chunk attends its raw states, so its first "
                         f"{prefill_tokens} positions would be exact (KL 0) where kvstats' cache codes "
                         f"them; received prefill_tokens={prefill_tokens} (run the peers in a call of "
                         f"their own to prefill more)")
    context = getattr(model.config, "max_position_embeddings", None)
    streams = _token_ids(tokenizer, texts, max_tokens, context)
    if mode == "decode":
        _check_decoded(streams, prefill_tokens)
    with pinned_threads(threads):
        frames, memory = _compare(model, streams, configs, seed, window, mode, prefill_tokens,
                                  scheme_params, progress)
    df = pd.concat(frames, ignore_index=True)
    mem = {f"{name}:{b}": tuple(float(x) for x in np.mean(v, axis=0)) for (name, b), v in memory.items()}
    df.attrs["memory"] = mem
    if len(configs) == 1:
        df.attrs.update(bytes_per_token=next(iter(mem.values()))[0],
                        fp16_bytes_per_token=next(iter(mem.values()))[1])
    return df


def _check_decoded(streams, prefill_tokens):
    """Refuse decode mode when no row would come from a decode step; warn when some texts'
    rows would not. A text of n tokens has rows for positions 0..n-2, and position t is
    predicted by a decode step only when t >= prefill_tokens."""
    lengths = np.array([len(ids) for ids in streams])
    short = np.flatnonzero(lengths <= prefill_tokens + 1)
    if short.size == lengths.size:
        raise ValueError(f"mode='decode' needs a text longer than prefill_tokens + 1 = {prefill_tokens + 1} "
                         f"tokens (rows stop at the second-to-last token); received texts of "
                         f"{sorted(set(lengths.tolist()))} tokens, so every row would come from the "
                         f"prefill chunk (a prefill labelled decode): pass a smaller prefill_tokens, "
                         f"longer texts or mode='prefill'")
    if short.size:
        warnings.warn(f"{short.size} of {lengths.size} texts (indices {short.tolist()[:10]}"
                      f"{', ...' if short.size > 10 else ''}) have at most prefill_tokens + 1 = "
                      f"{prefill_tokens + 1} tokens: their rows in mode='decode' all come from the "
                      f"prefill chunk, no decode step", UserWarning, stacklevel=3)


def _make_cache(config, name, bits, seed, window, scheme_params):
    """A fresh cache: kvstats' :class:`~kvstats.models.QuantizedCache`, or a transformers peer
    (``window`` is its residual length; it has no randomness and no ``bits``)."""
    if is_peer(name):
        if bits is not None:
            raise ValueError(f"bits must be None for the transformers peer {name!r} (its budget is in "
                             f"its name); received {bits!r}")
        return make_peer_cache(name, config, residual_length=window, **scheme_params)
    from kvstats.models.cache import QuantizedCache

    # the config: sliding-window layers then drop the tokens their window no longer reaches
    return QuantizedCache(name, bits, seed=seed, window=window, config=config, **scheme_params)


def _memory(cache, config, peer: bool) -> tuple[float, float, float, float, float]:
    """(stored, fp16, held) bytes per token, the fixed bytes and the uncoded share. Held:
    the generic walk, the same for every cache. Stored: kvstats' own accounting (codes +
    tail), or for a peer what it holds. Fixed (rotations, codebooks, sketches: not growing
    with the sequence): kvstats' ``memory_report``; a peer holds none besides fp8's two
    float32 scales per layer, counted as held. Uncoded: ``memory_report``'s
    ``uncoded_share`` (full precision beyond the window; NaN for a peer, whose residual is
    its own)."""
    held = memory_held(cache, config)
    if peer:
        return (held["held_bytes_per_token"], held["fp16_bytes_per_token"], held["held_bytes_per_token"],
                0.0, float("nan"))
    report = cache.memory_report()
    return (cache.bytes_per_token(), cache.fp16_bytes_per_token(), held["held_bytes_per_token"],
            float(report["fixed_bytes"]), float(report["uncoded_share"]))


def _compare(model, streams, configs, seed, window, mode, prefill_tokens, scheme_params,
             progress=False):
    """The per-position frames of every (text, configuration), and the memory figures."""
    import sys

    import torch
    from tqdm.auto import tqdm

    frames, memory = [], {}
    bar = tqdm(total=len(streams) * len(configs), desc=f"kl_quality ({mode})", unit="run",
               file=sys.stderr, disable=not progress)
    for i, ids in enumerate(streams):
        ref = _log_probs(model, ids, None, "prefill", prefill_tokens)[:-1]
        p_ref = ref.exp()
        target = torch.tensor(ids[1:], dtype=torch.long)[:, None]
        nll_ref = -ref.gather(-1, target)[:, 0].numpy()
        top_ref = ref.argmax(-1)
        for name, b in configs:
            cache = _make_cache(model.config, name, b, seed + i, window, scheme_params)
            quant = _log_probs(model, ids, cache, mode, prefill_tokens)[:-1]
            memory.setdefault((name, b), []).append(_memory(cache, model.config, is_peer(name)))
            kl = (p_ref * (ref - quant)).sum(-1).clamp_min(0.0)  # clamp: float rounding only
            top_q = quant.argmax(-1)
            frames.append(pd.DataFrame({
                "scheme": name, "bits": np.nan if b is None else float(b), "window": window,
                "mode": mode, "text": i, "position": np.arange(len(ids) - 1),
                "kl": kl.numpy(), "top1_ref": top_ref.numpy(), "top1_quant": top_q.numpy(),
                "top1_agree": (top_ref == top_q).numpy(), "nll_ref": nll_ref,
                "nll_quant": -quant.gather(-1, target)[:, 0].numpy()}))
            bar.update()
    bar.close()
    return frames, memory


def summarize_quality(df: pd.DataFrame) -> pd.DataFrame:
    """llama.cpp-style summary of :func:`kl_quality` rows, one row per (scheme, bits, window, mode).

    ``df`` must hold each (scheme, bits, window, mode, text, position) once (a ValueError
    otherwise: frames of separate calls each number their texts from 0, so concatenated
    they need renumbering).

    Columns: ``n_texts, n_positions, mean_kl`` (over all positions), ``se_kl`` (its
    standard error with positions as units, as llama.cpp reports it), ``se_kl_text`` (its
    standard error with texts as units, the cluster-robust CR1 one: positions of one text
    are correlated, so this is the honest error bar; for texts of equal length it is
    sd(per-text means)/√n_texts), ``median_kl, p99_kl, max_kl,
    top1_agreement, ppl_ref, ppl_quant, ppl_ratio`` (perplexity = exp(mean NLL)), and,
    when ``df.attrs["memory"]`` has them, ``bytes_per_token, ratio_to_fp16`` and (when it
    has the held figures) ``held_bytes_per_token`` and ``fixed_bytes``, and (kvstats
    caches) ``uncoded_share``, the mean share of held tokens left in full precision
    beyond the window.

    Examples
    --------
    >>> import pandas as pd
    >>> from kvstats.models import summarize_quality
    >>> df = pd.DataFrame({"scheme": "KV", "bits": 4.0, "window": 0, "mode": "prefill",
    ...                    "text": [0, 0, 1], "position": [0, 1, 0], "kl": [0.0, 0.2, 0.1],
    ...                    "top1_agree": [True, False, True], "nll_ref": [1.0, 1.0, 1.0],
    ...                    "nll_quant": [1.0, 1.2, 1.1]})
    >>> round(float(summarize_quality(df)["mean_kl"].iloc[0]), 3)
    0.1
    """
    need = {"scheme", "bits", "window", "mode", "text", "position", "kl", "top1_agree", "nll_ref", "nll_quant"}
    if not isinstance(df, pd.DataFrame) or need - set(df.columns):
        missing = sorted(need - set(df.columns)) if isinstance(df, pd.DataFrame) else sorted(need)
        raise ValueError(f"df must be the DataFrame returned by kl_quality; missing columns {missing}")
    key = ["scheme", "bits", "window", "mode", "text", "position"]
    dup = df.duplicated(key, keep=False)
    if dup.any():
        # frames of separate calls each number their texts from 0: concatenated, their texts
        # were pooled as one (n_texts and se_kl_text wrong) or counted twice
        first = df.loc[dup, key].drop_duplicates().head(3).to_dict("records")
        raise ValueError(f"df must hold each ({', '.join(key)}) once; received {int(dup.sum())} rows "
                         f"sharing a key, e.g. {first}. Frames of separate kl_quality calls each number "
                         f"their texts from 0: renumber them before concatenating (e.g. "
                         f"df['text'] = i for the i-th single-text call), and run each configuration once")
    rows = []
    for key, g in df.groupby(["scheme", "bits", "window", "mode"], dropna=False, sort=False):
        kl = g["kl"].to_numpy(float)
        per_text = g.groupby("text")["kl"].agg(["sum", "size"]).to_numpy(float)
        n_texts = len(per_text)
        # mean_kl's standard error over texts (texts as clusters): each text's deviation
        # is its KL sum minus its share of the mean, so a long text weighs as in mean_kl
        dev = per_text[:, 0] - kl.mean() * per_text[:, 1]
        se_text = (float(np.sqrt(n_texts / (n_texts - 1) * np.sum(dev ** 2)) / kl.size)
                   if n_texts > 1 else np.nan)
        ppl_ref, ppl_q = float(np.exp(g["nll_ref"].mean())), float(np.exp(g["nll_quant"].mean()))
        row = dict(zip(["scheme", "bits", "window", "mode"], key))
        row.update(n_texts=int(g["text"].nunique()), n_positions=len(g), mean_kl=float(kl.mean()),
                   se_kl=float(kl.std(ddof=1) / np.sqrt(kl.size)) if kl.size > 1 else np.nan,
                   se_kl_text=se_text,
                   median_kl=float(np.median(kl)), p99_kl=float(np.quantile(kl, 0.99)),
                   max_kl=float(kl.max()), top1_agreement=float(g["top1_agree"].mean()),
                   ppl_ref=ppl_ref, ppl_quant=ppl_q, ppl_ratio=ppl_q / ppl_ref)
        bits = None if pd.isna(key[1]) else (int(key[1]) if float(key[1]).is_integer() else key[1])
        mem = df.attrs.get("memory", {}).get(f"{key[0]}:{bits}")
        if mem is not None:
            row["bytes_per_token"] = mem[0]
            row["ratio_to_fp16"] = mem[0] / mem[1]
            if len(mem) > 3:
                row["held_bytes_per_token"], row["fixed_bytes"] = mem[2], mem[3]
            if len(mem) > 4:
                row["uncoded_share"] = mem[4]
        rows.append(row)
    return pd.DataFrame(rows)
