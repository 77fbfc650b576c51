"""Passkey retrieval: a downstream accuracy task for quantized KV caches.

In the style of long-context KV-cache papers (KIVI, QJL, TurboQuant's needle test): a
five-digit number (the *passkey*) is hidden at a chosen depth of a long filler text, the
standard-library docstrings of :mod:`kvstats.models.texts`, and asked for at the end. The
model answers greedily; an answer is correct when its first run of digits is the passkey.

Protocol (the deployed one, as in KIVI and QJL): the prompt is prefilled in full precision
(float32 ``DynamicCache``) except its last token; the prefill's keys and values are then
stored in a :class:`~kvstats.models.QuantizedCache`, and the last prompt token and every
answer token read the context only through that cache. ``prefill="coded"`` instead runs
the prefill itself through the quantized cache (every key coded before attention reads
it, as :func:`~kvstats.models.kl_quality`'s ``mode="prefill"``), a harsher protocol in
which coding errors also reach the stored hidden states.

Each trial is paired across configurations: the same prompt and the same scheme seed.
The statistics are exact or score-based for small samples: Wilson intervals for an
accuracy, McNemar's exact test (binomial on the discordant pairs) against the float32
cache, and a one-sided Clopper-Pearson bound on the rate of answers the quantized cache
loses (fp32 right, quantized wrong), an upper bound on the accuracy drop.

One module over ~450 lines: prompts, the run loop and its paired statistics are one task
(about half of it docstrings); the statistics are small and specific to paired binary
outcomes against a reference.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

from kvstats._checks import check_choice, check_int, check_real
from kvstats.models.texts import check_context
from kvstats.stats.proportion import binom_test_half, wilson_interval  # noqa: F401 (wilson_interval: public here too)

INSTRUCTION = "There is a pass key hidden in the text below. Find it and memorize it."
QUESTION = "What is the pass key?"
ANSWER_PREFIX = "The pass key is"
PREFILLS = ("fp32", "coded")
REFERENCE = ("fp32", None)


@dataclasses.dataclass(frozen=True)
class PasskeyPrompt:
    """One trial's prompt.

    Attributes
    ----------
    text : str
        The full prompt (chat-formatted when built with ``chat=True``), ending with the
        answer prefix ``"The pass key is"``.
    passkey : str
        The hidden number.
    length : int
        Filler tokens (the haystack slice, without needle, instruction and template).
    depth : float
        Requested depth in [0, 1] (0: needle before the filler, 1: after it).
    realized_depth : float
        Fraction of the filler's characters before the needle: ``depth`` rounded to a
        character, then moved back, when that falls inside a line, to the line's start
        (the needle never splits a line; a line's start or end is kept as it is).
    offset : int
        First filler token in the concatenated haystack.

    Examples
    --------
    >>> class Chars:                      # a stand-in tokenizer: one id per character
    ...     def decode(self, ids):
    ...         return "".join(map(chr, ids))
    >>> hay = [ord(c) for c in "one\\ntwo\\nthree\\n"]
    >>> p = make_prompt(Chars(), hay, len(hay), 0.5, "4711", chat=False)
    >>> p.passkey, p.length, p.depth, round(p.realized_depth, 3), p.offset
    ('4711', 14, 0.5, 0.5, 0)
    >>> p.text.endswith(ANSWER_PREFIX)
    True
    """

    text: str
    passkey: str
    length: int
    depth: float
    realized_depth: float
    offset: int


def haystack_ids(tokenizer, texts: Sequence[str] | None = None) -> list[int]:
    """Token ids of the filler: the texts joined by blank lines (default: every
    :func:`~kvstats.models.stdlib_texts` docstring, about 17,500 SmolLM2 tokens).

    Examples
    --------
    >>> from kvstats.models.retrieval import haystack_ids
    >>> class Chars:                      # a stand-in tokenizer: one id per character
    ...     def __call__(self, text, add_special_tokens=False):
    ...         return {"input_ids": [ord(c) for c in text]}
    >>> len(haystack_ids(Chars(), ["ab", "c"]))
    5
    """
    from kvstats.models.texts import stdlib_texts

    texts = stdlib_texts() if texts is None else list(texts)
    if not texts or not all(isinstance(t, str) and t for t in texts):
        raise TypeError(f"texts must be a non-empty sequence of non-empty strings; received {texts!r:.80}")
    return list(tokenizer("\n\n".join(texts), add_special_tokens=False)["input_ids"])


def make_prompt(tokenizer, haystack: Sequence[int], length: int, depth: float, passkey: str, *,
                offset: int = 0, chat: bool = True) -> PasskeyPrompt:
    """Build one prompt: ``length`` filler tokens from ``offset``, the passkey at ``depth``.

    Parameters
    ----------
    tokenizer
        A transformers tokenizer (``decode``; ``apply_chat_template`` when ``chat``).
    haystack : sequence of int
        Filler token ids (:func:`haystack_ids`).
    length : int
        Filler tokens, at least 1 and at most ``len(haystack) - offset``.
    depth : float
        Where the needle goes, in [0, 1]: the fraction of the filler's characters before
        it, ``round(depth · characters)``, or the start of the line that position falls
        inside (0: before the filler, 1: after it; see ``realized_depth``).
    passkey : str
        The number to hide (digits only).
    offset : int
        First filler token.
    chat : bool
        Wrap instruction, text and question in the tokenizer's chat template (the instruct
        model answers far more reliably so); the answer prefix follows the template.

    Examples
    --------
    >>> from kvstats.models.retrieval import make_prompt
    >>> class Chars:
    ...     def decode(self, ids):
    ...         return "".join(map(chr, ids))
    >>> hay = [ord(c) for c in "line one\\nline two\\nline three\\n"]
    >>> p = make_prompt(Chars(), hay, len(hay), 0.5, "12345", chat=False)
    >>> "line one\\n\\nThe pass key is 12345." in p.text, p.text.endswith("The pass key is")
    (True, True)

    A depth that lands on a line's end keeps it (the line is not split), one inside a
    line moves to its start:

    >>> hay = [ord(c) for c in "abc\\ndef\\n"]                # 8 characters, breaks at 3 and 7
    >>> [make_prompt(Chars(), hay, 8, d, "1", chat=False).realized_depth for d in (0.375, 0.5, 0.75)]
    [0.375, 0.5, 0.5]
    """
    length = check_int(length, "length", low=1)
    offset = check_int(offset, "offset", low=0)
    depth = check_real(depth, "depth", low=0.0, high=1.0)
    if not isinstance(chat, bool):
        raise TypeError(f"chat must be a bool; received {chat!r}")
    if not isinstance(passkey, str) or not passkey.isdigit():
        raise ValueError(f"passkey must be a non-empty string of digits; received {passkey!r}")
    if offset + length > len(haystack):
        raise ValueError(f"length must fit the haystack: offset + length = {offset + length} > "
                         f"{len(haystack)} tokens; choose a smaller length or offset")
    body = tokenizer.decode(list(haystack[offset:offset + length]))
    pos = int(round(depth * len(body)))
    if 0 < pos < len(body) and body[pos] != "\n":
        # not inside a line (the needle brings its own line breaks, so a line's end, before
        # its break, is a boundary too): back to the start of the line pos falls in
        pos = body.rfind("\n", 0, pos) + 1
    needle = f"\nThe pass key is {passkey}. Remember it. {passkey} is the pass key.\n"
    context = body[:pos] + needle + body[pos:]
    user = f"{INSTRUCTION}\n\n{context}\n\n{QUESTION}"
    if chat:
        text = tokenizer.apply_chat_template([{"role": "user", "content": user}], tokenize=False,
                                             add_generation_prompt=True) + ANSWER_PREFIX
    else:
        text = f"{user}\n{ANSWER_PREFIX}"
    return PasskeyPrompt(text, passkey, length, depth, pos / max(len(body), 1), offset)


def make_prompts(tokenizer, lengths: Sequence[int], depths: Sequence[float], trials: int, *,
                 seed: int = 0, haystack: Sequence[int] | None = None,
                 chat: bool = True) -> list[PasskeyPrompt]:
    """``trials`` prompts per (length, depth) cell, each with its own random passkey and
    filler offset (drawn from ``seed``).

    Every prompt is an independent draw, so the prompts are the units of
    :func:`summarize_retrieval`'s tests and intervals. (Until 2026-12-02 trial ``t`` of
    every cell shared one passkey and offset: the prompts of a trial were correlated, and
    25 prompts of 5 depths were 5 independent draws, not 25.)

    Examples
    --------
    >>> from kvstats.models.retrieval import make_prompts
    >>> class Chars:
    ...     def decode(self, ids):
    ...         return "".join(map(chr, ids))
    >>> hay = [ord(c) for c in "abc\\n" * 50]
    >>> ps = make_prompts(Chars(), [40], [0.0, 1.0], 3, haystack=hay, chat=False)
    >>> len(ps), len({p.passkey for p in ps}), len(ps[0].passkey)
    (6, 6, 5)
    """
    trials = check_int(trials, "trials", low=1)
    for name, seq in (("lengths", lengths), ("depths", depths)):
        if isinstance(seq, (str, bytes)) or not isinstance(seq, (Sequence, np.ndarray)):
            raise TypeError(f"{name} must be a sequence (e.g. [{'512' if name == 'lengths' else '0.5'}]); "
                            f"received {seq!r:.80}")
    if haystack is None:
        haystack = haystack_ids(tokenizer)
    lengths = [check_int(n, "lengths", low=1) for n in lengths]
    if not lengths or not len(depths):
        raise ValueError("lengths and depths must be non-empty")
    if max(lengths) > len(haystack):
        raise ValueError(f"lengths must be at most the haystack's {len(haystack)} tokens; received {max(lengths)}")
    rng = np.random.default_rng(check_int(seed, "seed", low=0))
    cells = [(n, d) for n in lengths for d in depths for _ in range(trials)]
    keys = rng.integers(10_000, 100_000, size=len(cells))
    starts = rng.random(len(cells))
    return [make_prompt(tokenizer, haystack, n, d, str(keys[i]), chat=chat,
                        offset=int(starts[i] * (len(haystack) - n + 1)))
            for i, (n, d) in enumerate(cells)]


def extract_answer(text: str) -> str | None:
    """The first run of digits in a generated answer (None if there is none).

    Examples
    --------
    >>> from kvstats.models.retrieval import extract_answer
    >>> extract_answer(" 48213.<|im_end|>"), extract_answer(" a command")
    ('48213', None)
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str; received {type(text).__name__}")
    m = re.search(r"\d+", text)
    return m.group(0) if m else None


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Tokens until the first divergence of two greedy generations.

    Examples
    --------
    >>> from kvstats.models.retrieval import common_prefix
    >>> common_prefix([5, 6, 7], [5, 6, 9]), common_prefix([1, 2], [1, 2])
    (2, 2)
    """
    # item by item (a few tokens): numpy read two strings as two scalars, so common_prefix("abc",
    # "abd") was 0, not 2
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


# ---------------------------------------------------------------------- statistics
@dataclasses.dataclass(frozen=True)
class McNemarResult:
    """McNemar's exact test of two paired binary outcomes.

    ``b``: reference right, other wrong; ``c``: reference wrong, other right; ``pvalue``:
    two-sided exact binomial p on the ``b + c`` discordant pairs; ``min_pvalue``: the
    smallest p attainable with ``b + c`` discordant pairs (above alpha: the test could not
    have rejected, whatever the split).

    Examples
    --------
    Three prompts lost and one gained: p = 2·P(Binomial(4, ½) ≤ 1) = 2·5/16, and no split
    of four discordant pairs reaches 0.05 (smallest p 2·0.5⁴):

    >>> r = mcnemar_exact([1, 1, 1, 0, 1, 0], [0, 0, 0, 1, 1, 0])
    >>> r
    McNemarResult(b=3, c=1, pvalue=0.625, min_pvalue=0.125)
    """

    b: int
    c: int
    pvalue: float
    min_pvalue: float


def mcnemar_exact(reference, other) -> McNemarResult:
    """McNemar's exact test on paired booleans (e.g. correct with fp32, with a scheme).

    Examples
    --------
    >>> from kvstats.models.retrieval import mcnemar_exact
    >>> r = mcnemar_exact([1, 1, 1, 1, 1, 1, 0], [0, 0, 0, 0, 0, 0, 0])
    >>> r.b, r.c, r.pvalue, r.min_pvalue
    (6, 0, 0.03125, 0.03125)
    """
    x, y = np.asarray(reference), np.asarray(other)
    if x.shape != y.shape or x.ndim != 1 or x.size == 0:
        raise ValueError(f"reference and other must be equal-length non-empty 1-d sequences; "
                         f"received shapes {x.shape} and {y.shape}")
    if not (np.isin(x, (0, 1)).all() and np.isin(y, (0, 1)).all()):
        raise ValueError("reference and other must hold booleans (0/1)")
    x, y = x.astype(bool), y.astype(bool)
    b, c = int(np.sum(x & ~y)), int(np.sum(~x & y))
    m = b + c
    # the exact sign test of the discordant pairs
    p = 1.0 if m == 0 else binom_test_half(b, m)
    return McNemarResult(b, c, p, min(1.0, 2 * 0.5 ** m))


def loss_upper_bound(b, n, confidence: float = 0.95) -> np.ndarray:
    """One-sided exact (Clopper-Pearson) upper bound on P(reference right, other wrong).

    The accuracy drop is at most this rate, so the bound also bounds the drop: "no loss"
    is supported at margin delta only where the bound is below delta. ``b``: prompts the
    reference answers and the other does not, of ``n`` paired prompts (whole counts,
    ``0 <= b <= n``, ``n >= 1``; arrays broadcast); ``confidence`` in (0, 1).

    Examples
    --------
    >>> from kvstats.models.retrieval import loss_upper_bound
    >>> round(float(loss_upper_bound(0, 60)), 4)    # 1 - 0.05 ** (1/60)
    0.0487
    """
    b, n = np.asarray(b, dtype=float), np.asarray(n, dtype=float)
    # open, as summarize_retrieval's: confidence 0 or 1 gave the empty bounds 0 and 1
    confidence = check_real(confidence, "confidence", low=0.0, high=1.0, low_open=True, high_open=True)
    # counts: a fraction was taken as one, NaN returned NaN (every comparison False)
    whole = all(np.isfinite(x).all() and (x == np.round(x)).all() for x in (b, n))
    if not whole or np.any(n < 1) or np.any(b < 0) or np.any(b > n):
        raise ValueError(f"b and n must be whole counts with 0 <= b <= n and n >= 1; received b={b}, n={n}")
    with np.errstate(invalid="ignore", divide="ignore"):
        upper = sps.beta.ppf(confidence, b + 1, np.maximum(n - b, 1e-300))
    return np.where(b >= n, 1.0, upper)


# ---------------------------------------------------------------------- running the model
def config_label(config: tuple) -> str:
    """``"KQV@3"``, ``"K4V2"``, ``"kivi@2/w32"``, ``"qjl@3[n_outliers=4]"`` for a
    ``(scheme, bits[, window[, scheme_params]])`` tuple.

    Examples
    --------
    >>> from kvstats.models.retrieval import config_label
    >>> config_label(("KQV", 3)), config_label(("K4V2", None)), config_label(("kivi", 2, 32))
    ('KQV@3', 'K4V2', 'kivi@2/w32')
    >>> config_label(("qjl", 3, 0, {"n_outliers": 4}))
    'qjl@3[n_outliers=4]'

    """
    scheme, bits, window, params = _config(config)
    extra = "".join(f",{k}={v}" for k, v in sorted(params.items()))
    return (scheme + ("" if bits is None else f"@{bits}") + (f"/w{window}" if window else "")
            + (f"[{extra[1:]}]" if extra else ""))


def _config(config) -> tuple[str, int | None, int, dict]:
    if (not isinstance(config, tuple) or len(config) not in (2, 3, 4) or not isinstance(config[0], str)
            or (len(config) == 4 and not isinstance(config[3], dict))):
        raise TypeError(f"a config must be a tuple (scheme, bits[, window[, scheme_params dict]]); "
                        f"received {config!r}")
    window = config[2] if len(config) >= 3 else 0
    params = dict(config[3]) if len(config) == 4 else {}
    taken = sorted(set(params) & {"seed", "window", "config"})
    if taken:
        # run_retrieval sets these itself (seed + prompt index, the tuple's window, the
        # model's config): a "seed" here passed the check and failed after the first prompt
        raise ValueError(f"a config's scheme_params must not hold {taken} (run_retrieval's seed=, the "
                         f"tuple's third item, the model's config); received {config!r}")
    return config[0], config[1], check_int(window, "window", low=0), params


def _greedy(model, tokenizer, cache, first: int, steps: int, stop: set[int]) -> list[int]:
    """Greedy tokens until an end token, or the first token after a number that is not
    a digit (the answer is complete; saves the remaining decode steps)."""
    import torch

    out, token, digits = [], first, False
    for _ in range(steps):
        logits = model(input_ids=torch.tensor([[token]]), cache=cache, use_cache=True).logits
        token = int(logits[0, -1].argmax())
        out.append(token)
        piece = tokenizer.decode([token])
        if token in stop or (digits and not piece.isdigit()):
            break
        digits = digits or any(ch.isdigit() for ch in piece)
    return out


def run_retrieval(model, tokenizer, prompts: Sequence[PasskeyPrompt], configs: Sequence[tuple], *,
                  max_new_tokens: int = 8, prefill: str = "fp32", seed: int = 0,
                  progress: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """Answer every prompt with the float32 cache and each quantized configuration.

    Parameters
    ----------
    model, tokenizer
        A causal LM and its tokenizer (:func:`~kvstats.models.load_model`).
    prompts : sequence of PasskeyPrompt
    configs : sequence of tuple
        ``(scheme, bits[, window[, scheme_params]])`` for
        :class:`~kvstats.models.QuantizedCache`, each once (``scheme_params`` without
        ``seed``, ``window`` or ``config``, which are set here); the float32 reference
        always runs.
    max_new_tokens : int
        Greedy answer tokens (fewer at an end token, or once a number is followed by a
        token that is not all digits).
    prefill : {"fp32", "coded"}
        Prefill in full precision and store it coded (deployed protocol), or prefill
        through the quantized cache.
    seed : int
        Scheme seed of prompt ``i`` is ``seed + i`` (shared by the configurations).
    progress : callable, optional
        Called as ``progress(i, len(prompts))`` after each prompt.

    Returns
    -------
    pandas.DataFrame
        One row per prompt and configuration: ``trial, config, length, depth,
        realized_depth, prompt_tokens, passkey, answer, correct, agree_tokens, ref_tokens,
        identical, bytes_per_token, uncoded_share``. ``agree_tokens``: greedy tokens until
        the first divergence from the float32 answer (``ref_tokens`` long);
        ``uncoded_share``: ``memory_report``'s share of the cache's tokens held in full
        precision beyond the window after the answer (1 for the float32 reference; near 1,
        the configuration measured the unquantized model: klt below its block).

    Raises
    ------
    ValueError
        A prompt and its answer beyond the model's context (``len(prompt ids) +
        max_new_tokens - 1`` positions above ``max_position_embeddings``: RoPE past the
        trained range, an extrapolating model's answers), checked for every prompt
        before the first runs; unknown schemes, bad bits, repeated configs; repeated prompts
        (the same text twice: one unit counted twice).

    Examples
    --------
    >>> from kvstats.models import load_model
    >>> from kvstats.models.retrieval import make_prompts, run_retrieval
    >>> model, tok = load_model()                                    # doctest: +SKIP
    >>> prompts = make_prompts(tok, [512], [0.5], 2)                  # doctest: +SKIP
    >>> df = run_retrieval(model, tok, prompts, [("KQV", 3)])         # doctest: +SKIP
    >>> df.groupby("config").correct.mean()                          # doctest: +SKIP
    """
    import torch
    from transformers import DynamicCache

    from kvstats.models.cache import QuantizedCache

    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", low=1)
    prefill = check_choice(prefill, "prefill", PREFILLS)
    seed = check_int(seed, "seed", low=0)
    if progress is not None and not callable(progress):  # (was "not callable" after the first prompt)
        raise TypeError(f"progress must be None or a callable progress(i, n); received {progress!r:.80}")
    configs = [_config(c) for c in configs]
    labels = [config_label(c) for c in configs]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:  # one label per configuration: summarize_retrieval pairs the rows by it
        raise ValueError(f"configs must be distinct; received {repeated} more than once")
    for scheme, bits, window, params in configs:  # unknown names, bad bits: now, not after a prompt's runs
        QuantizedCache(scheme, bits, seed=seed, window=window, config=model.config, **params)
    if not prompts or not all(isinstance(p, PasskeyPrompt) for p in prompts):
        raise TypeError("prompts must be a non-empty sequence of PasskeyPrompt (make_prompts)")
    # a prompt is summarize_retrieval's unit: the same text twice (e.g. make_prompts called twice
    # with one seed) is one draw counted twice, inflating n and the tests' power
    seen: dict[str, int] = {}
    repeats = [f"prompts[{i}] = prompts[{seen[p.text]}] (passkey {p.passkey}, length {p.length}, depth {p.depth})"
               for i, p in enumerate(prompts) if seen.setdefault(p.text, i) != i]
    if repeats:
        raise ValueError(f"prompts must be distinct (one unit each); received {len(repeats)} repeated: "
                         f"{'; '.join(repeats[:5])}{'; ...' if len(repeats) > 5 else ''}")
    stop = {t for t in (tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>"))
            if isinstance(t, int) and t >= 0}
    prompt_ids = [list(tokenizer(p.text, add_special_tokens=False)["input_ids"]) for p in prompts]
    # the last answer token is never fed back: a prompt and its answer take
    # len(ids) + max_new_tokens - 1 positions; every prompt is checked before the first runs
    context = getattr(model.config, "max_position_embeddings", None)
    check_context([len(ids) + max_new_tokens - 1 for ids in prompt_ids], context,
                  f"prompts (with max_new_tokens={max_new_tokens} answer tokens)",
                  "choose shorter lengths in make_prompts or fewer max_new_tokens")
    rows = []
    for i, (p, ids) in enumerate(zip(prompts, prompt_ids)):
        head = torch.tensor([ids[:-1]])
        base = dict(trial=i, length=p.length, depth=p.depth, realized_depth=p.realized_depth,
                    prompt_tokens=len(ids), passkey=p.passkey)
        with torch.inference_mode():
            ref_cache = DynamicCache()
            model(input_ids=head, cache=ref_cache, use_cache=True)
            kv = [(layer.keys.clone(), layer.values.clone()) for layer in ref_cache.layers]
            ref = _greedy(model, tokenizer, ref_cache, ids[-1], max_new_tokens, stop)
            del ref_cache
            runs = [("fp32", ref, float("nan"), 1.0)]
            for scheme, bits, window, params in configs:
                cache = QuantizedCache(scheme, bits, seed=seed + i, window=window, config=model.config,
                                       **params)
                if prefill == "fp32":
                    for layer, (k, v) in enumerate(kv):
                        cache.update(k, v, layer)
                else:
                    model(input_ids=head, cache=cache, use_cache=True)
                out = _greedy(model, tokenizer, cache, ids[-1], max_new_tokens, stop)
                report = cache.memory_report()
                runs.append((config_label((scheme, bits, window, params)), out,
                             float(report["bytes_per_token"]), float(report["uncoded_share"])))
        for label, out, bpt, uncoded in runs:
            answer = tokenizer.decode(out)
            rows.append(dict(base, config=label, answer=answer, correct=extract_answer(answer) == p.passkey,
                             agree_tokens=common_prefix(ref, out), ref_tokens=len(ref),
                             identical=list(out) == list(ref), bytes_per_token=bpt,
                             uncoded_share=uncoded))
        if progress is not None:
            progress(i, len(prompts))
    return pd.DataFrame(rows)


def summarize_retrieval(df: pd.DataFrame, *, reference: str = "fp32", alpha: float = 0.05,
                        confidence: float = 0.95) -> pd.DataFrame:
    """Accuracy with Wilson intervals, McNemar's exact test against the reference (Holm
    over the configurations), the loss bound, and greedy agreement, per configuration.

    ``df`` must hold each (config, trial) once (a ValueError otherwise: batches of
    separate runs each number their trials from 0, so concatenated they need renumbering).

    Columns: ``config, n, correct, accuracy, acc_low, acc_high, ref_only, only, p_mcnemar,
    p_holm, min_p, min_p_holm, verdict, loss_upper, agree_tokens, identical, bytes_per_token``
    and, when ``df`` has it, ``uncoded_share`` (its mean over prompts).
    ``min_p`` is the smallest p-value McNemar's test could give with the row's discordant
    prompts (all of them one way) and ``min_p_holm`` its Holm-adjusted value, the other
    configurations' p-values as observed (:func:`kvstats.analysis.resolution.attainable_adjusted`).
    ``verdict``: ``"worse"``/``"better"`` (Holm-adjusted p <= alpha), ``"not resolvable"``
    (too few discordant prompts for any split to reject after Holm, min_p_holm > alpha),
    else ``"no difference detected"``; the reference's row reads ``"reference"``.

    Examples
    --------
    >>> import pandas as pd
    >>> from kvstats.models.retrieval import summarize_retrieval
    >>> df = pd.DataFrame(dict(trial=[0, 1, 0, 1], config=["fp32", "fp32", "X", "X"],
    ...                        correct=[True, True, True, False], agree_tokens=[3, 3, 3, 1],
    ...                        identical=[True, True, True, False], bytes_per_token=[0, 0, 9, 9]))
    >>> print(summarize_retrieval(df)[["config", "accuracy", "ref_only", "verdict"]].to_string(index=False))
    config  accuracy  ref_only        verdict
      fp32       1.0         0      reference
         X       0.5         1 not resolvable
    """
    from kvstats.analysis.resolution import attainable_adjusted
    from kvstats.stats import adjust_pvalues

    alpha = check_real(alpha, "alpha", low=0.0, high=1.0, low_open=True, high_open=True)
    confidence = check_real(confidence, "confidence", low=0.0, high=1.0, low_open=True, high_open=True)
    need = {"trial", "config", "correct", "agree_tokens", "identical", "bytes_per_token"}
    if not isinstance(df, pd.DataFrame) or not need <= set(df.columns):
        raise ValueError(f"df must be run_retrieval's frame with columns {sorted(need)}")
    dup = df.duplicated(["config", "trial"], keep=False)
    if dup.any():
        # batches of run_retrieval each number their trials from 0: concatenated, a trial
        # number named two prompts, paired and counted as one unit twice
        first = df.loc[dup, ["config", "trial"]].drop_duplicates().head(3).to_dict("records")
        raise ValueError(f"df must hold each (config, trial) once; received {int(dup.sum())} rows sharing "
                         f"a key, e.g. {first}. Frames of separate run_retrieval calls each number their "
                         f"trials from 0: renumber them before concatenating (e.g. add the earlier "
                         f"frames' prompt count to a later frame's trial)")
    if reference not in set(df.config):
        raise ValueError(f"reference must be one of the configs {sorted(set(df.config))}; received {reference!r}")
    ref = df[df.config == reference].set_index("trial").correct.sort_index()
    rows = []
    for config, g in df.groupby("config", sort=False):
        g = g.set_index("trial").sort_index()
        if not g.index.equals(ref.index):
            raise ValueError(f"config {config!r} must have the reference's trials (paired design)")
        k, n = int(g.correct.sum()), len(g)
        lo, hi = wilson_interval(k, n, confidence)
        row = dict(config=config, n=n, correct=k, accuracy=k / n, acc_low=float(lo), acc_high=float(hi),
                   agree_tokens=float(g.agree_tokens.mean()), identical=float(g.identical.mean()),
                   bytes_per_token=float(g.bytes_per_token.mean()))
        if "uncoded_share" in g:   # frames written before it was recorded lack it
            row["uncoded_share"] = float(g.uncoded_share.mean())
        # the reference's row has no test (NaN); every row has the columns, also a run of
        # the reference alone (was a KeyError on "p_mcnemar")
        row.update(ref_only=np.nan, only=np.nan, p_mcnemar=np.nan, min_p=np.nan, loss_upper=np.nan)
        if config != reference:
            t = mcnemar_exact(ref.to_numpy(), g.correct.to_numpy())
            row.update(ref_only=t.b, only=t.c, p_mcnemar=t.pvalue, min_p=t.min_pvalue,
                       loss_upper=float(loss_upper_bound(t.b, n, confidence)))
        rows.append(row)
    out = pd.DataFrame(rows)
    tested = out.config != reference
    out["p_holm"] = out["min_p_holm"] = np.nan
    if tested.any():
        out.loc[tested, "p_holm"] = adjust_pvalues(out.loc[tested, "p_mcnemar"].to_numpy(),
                                                   method="holm").pvalues_adjusted
        # resolvable = could have been rejected inside the Holm family (not merely alone: 6
        # discordant prompts reach p = 0.031 alone, far from Holm's 0.05/9 after 8 rejections)
        out.loc[tested, "min_p_holm"] = attainable_adjusted(out.loc[tested, "p_mcnemar"].to_numpy(),
                                                            out.loc[tested, "min_p"].to_numpy(), "holm", alpha)
    verdict = np.where(out.p_holm <= alpha, np.where(out.only > out.ref_only, "better", "worse"),
                       np.where(out.min_p_holm > alpha, "not resolvable", "no difference detected"))
    out["verdict"] = np.where(tested, verdict, "reference")
    for col in ("ref_only", "only"):
        out[col] = out[col].fillna(0).astype(int)
    cols = ["config", "n", "correct", "accuracy", "acc_low", "acc_high", "ref_only", "only", "p_mcnemar",
            "p_holm", "min_p", "min_p_holm", "verdict", "loss_upper", "agree_tokens", "identical", "bytes_per_token"]
    return out[cols + [c for c in ("uncoded_share",) if c in out]]
