"""A transformers ``Cache`` that stores the real codes of any kvstats scheme.

(This module is the adapter to transformers' ``Cache`` API; a layer's codes store is
:mod:`kvstats.models.cache_layer`, the byte accounting :mod:`kvstats.models.cache_memory`,
the attention arithmetic :mod:`kvstats.models.code_attention` and
:mod:`kvstats.models.group_codes`.)

Each layer keeps the scheme's codes (packed bits, small-integer codes, norms, scales) and
a full-precision *tail*: the most recent ``window`` tokens, plus, for schemes whose
statistics are per group of tokens (``kivi`` and ``qjl``: ``group_size``, 32 by default;
``klt``: its block, ``group_size`` 1024 by default), the incomplete last group (as KIVI
keeps its residual). When the tail grows beyond that, its oldest tokens are coded, in
whole groups, with the layer's scheme, built once with a per-layer seed, so keys arriving
in later chunks are coded with the same rotation and sketch as earlier ones. A sequence
shorter than ``window`` plus one group is therefore not quantized at all (klt below
1,024 tokens by default): ``memory_report()["uncoded_tokens"]`` counts the tokens held
uncoded beyond the window, and the first read for attention while a layer holds more of
them than coded ones issues an :class:`~kvstats.models.cache_layer.UncodedTokensWarning`
(once per cache).

Two attention paths (``attention=``):

- **Codes** (``"codes"``, the default for per-vector schemes that export,
  ``SchemeDef.gpu`` — KV, KQV, QKQV, turboquant_mse/prod, K{a}V{b} — with their default
  Hadamard or no rotation): the layer holds only the packed codes, norms and the tail, in
  torch buffers grown in place (:class:`~kvstats.models.code_attention.GrowingBuffer`);
  new tokens are coded batched over heads and tokens (one torch call per prefill block,
  one C call per decode step), and a decode step's attention is computed from the codes
  by :func:`~kvstats.models.code_attention.code_attention` (rotated query against
  centroids, QJL term from the sign bits, output accumulated in the rotated space;
  compiled look-up loops of :mod:`kvstats.models.lut_kernel` when a C compiler is
  available). ``update`` returns a :class:`~kvstats.models.attention_hook.CodedKV` handle
  that transformers' ``"eager"``/``"sdpa"`` attention (wrapped on first use) routes
  there; a prefill chunk (several queries) is decoded transiently and given to the
  model's own attention. ``keep_decoded=True`` adds a decoded copy of the looked-up
  values (float32, rotated space) that the same loops read instead of the codes: the
  same numbers (greedy outputs identical), the look-up's cost apart. Each KV head has its
  own scheme, seeded ``SeedSequence([seed, layer, head])`` (``per_head=False``: one per
  layer, ``SeedSequence([seed, layer])``).
- **Grouped codes** (``"codes"``, the default for ``kivi`` and ``qjl``): the numpy coders
  code each whole group of tokens once (``SeedSequence([seed, layer])``, one draw per KV
  head) and the layer holds only what they store, in torch buffers grown by whole groups
  (:mod:`kvstats.models.group_codes`: packed codes, float16 scales/zeros, sign bits,
  norms, outlier indices); a decode step's attention reads them (KIVI keys: the query
  scaled by each group's scales against the integer codes, plus ``q·z_g``; values:
  ``Σ (p s) x + Σ p z`` per channel group; QJL keys: the quantizer's estimator from the
  sign bits). No decoded copy (``keep_decoded=True`` is refused: use ``attention="model"``).
- **Model** (``"model"``; the only path of schemes without a code-reading one:
  identity, a Haar rotation, deployed formats): ``update`` returns decoded keys and values to the model's
  own attention, any implementation, from a kept decoded copy (the default here) or
  decoded on every read (``keep_decoded=False``: one decode call over all the held codes
  of a scheme whose arrays share one layout; per coded chunk, one per decode step, for
  Haar-rotated codes, klt's, and fp8/nvfp4 with a per-call scale, so a read's cost grows
  with the steps there). For exportable schemes the codes are
  coded as on the codes path; attention differs from it by float32 rounding only, which
  a quantized cache can amplify (a new key on a code boundary gets another code), so
  greedy outputs may part after many steps. The numpy-coded schemes use
  ``SeedSequence([seed, layer])`` with one draw per KV head, as before.

Every copy is counted in :meth:`QuantizedCache.memory_report` and labelled.

Sliding-window layers (``config=model.config``, as transformers' ``DynamicCache`` takes
it): before each update a layer drops the oldest coded tokens that no later query can
attend (beyond the last ``sliding_window − 1``), once they number ``max(16, W/32)``, in
whole token groups or coded chunks, and tells the model's mask the held span
(``get_mask_sizes``), so attention reads the same tokens and memory stops growing.

KV-sharing models (transformers' ``num_kv_shared_layers``: Gemma3n, Gemma 4): a reusing
layer never updates the cache; it attends what its producer's ``update`` returned (on the
codes path the handle, read with the reusing layer's queries), so the cache holds, and
``memory_report`` counts, each producer's codes once. Code outside the attention that
indexes those shared states (Gemma 4's assistant drafting) needs ``attention="model"``: a
handle refuses indexing with a TypeError that says so. MistralLarge4, whose layers share
a compressed latent (``kv_source_layers``) beside an indexer's keys, is refused: by its
config's ``indexed_attention`` layers, or, without a config, by the latent's shape
(tests/models/test_cache_shared_kv.py).

Looped models (transformers' Dory: its recurrent layers run several times): with
``config=``, each loop's copies of the recurrent layers (``recurrent_kv_cache_mode=
"per_loop"``, cache layers after the model's) are layers of the types they copy, so a
copy of a sliding-window layer drops as that layer does; ``"last_loop"``, whose earlier
loops read a layer's past cut to its window, is refused with sliding-window layers in
the recurrent section, and under transformers 5.25 and later altogether: there the earlier
loops read through the model's ``DoryPastReader``, which wraps transformers' own layer
types only (tests/models/test_cache_looped.py). Without ``config=`` the cache cannot see
the model's loop mode: pass it for a looped model.

For per-vector schemes and ``window=0`` a single forward pass over a sequence is the same
procedure as teacher-forced token-by-token decoding (every key is coded before attention
reads it in both cases); the two differ only where float32 rounding of the quantizer's
input flips a code on a boundary (``tests/models`` checks both agree).

Rows of a batch are coded as they come, pad tokens included: per-vector schemes code each
token alone, so a left-padded row's real tokens get the codes they get alone; kivi's and
qjl's token groups take pad tokens into their first group's statistics (and shift the
group boundaries by the pad count), and fp8/nvfp4's per-head scale spans the whole
prefill block, pads too, while each later update (a decoding step) codes its tokens with
a scale of their own: such a cache codes otherwise than a sweep coding N tokens at once
(``SchemeDef.couples_tokens``; a static ``scale=<float>`` codes alike in both). Compare
those schemes one sequence at a time (as
``kvstats.models.quality`` and ``retrieval`` do). A scale per encode call
(``scale="tensor"``) would couple the rows themselves: a batch of more than one row is
refused for it.

Use it as any transformers cache: ``model(input_ids, cache=cache)`` or
``model.generate(input_ids, cache=cache)`` (transformers 5.x; the older keyword
``past_key_values=`` still works there, with a deprecation warning). Beam search (batch
rows reordered, repeated or selected in every buffer) works for the schemes whose codes
are torch buffers (the code-reading ones); cropping (assisted decoding) for the
per-vector ones with no window (a window's coded tokens cannot be restored, a token
group's statistics not split).
"""

from __future__ import annotations

from transformers.cache_utils import Cache

from kvstats._checks import check_int, did_you_mean
from kvstats.models.attention_hook import install
# _CodesLayer, _array_bytes and _tensor_bytes were defined here before the split (import path kept)
from kvstats.models.cache_layer import UncodedTokensWarning, _CodesLayer
from kvstats.models.cache_memory import _array_bytes, _CacheMemory, _tensor_bytes  # noqa: F401
from kvstats.models.group_codes import grouped_kind
from kvstats.quant.registry import REGISTRY, parse_scheme_name

__all__ = ["QuantizedCache", "UncodedTokensWarning"]


class QuantizedCache(_CacheMemory, Cache):
    """A transformers KV cache that stores each layer's keys and values as scheme codes.

    Parameters
    ----------
    scheme_name : str
        A name from :data:`kvstats.SCHEMES` or ``"K{a}V{b}"``.
    bits : int or None
        The scheme's budget in bits per coordinate (None for ``identity`` and ``K{a}V{b}``).
    seed : int
        Randomness: ``SeedSequence([seed, layer, head])`` per KV head on the codes path,
        ``SeedSequence([seed, layer])`` (one draw per head) for numpy-coded schemes.
    window : int
        Most recent tokens kept in full precision (the model's dtype), as KIVI's residual.
        Token-grouped schemes keep their newest, incomplete group in full precision too,
        beyond the window: kivi and qjl (``group_size``, 32 by default) and klt (its
        block, ``group_size`` 1024 by default: nothing is coded below 1,024 tokens). Those
        tokens are ``memory_report()["uncoded_tokens"]``; where they outnumber a layer's
        coded tokens an :class:`~kvstats.models.cache_layer.UncodedTokensWarning` says so
        (once per cache).
    per_head : bool
        Independent rotation/sketch per KV head (default) or one shared by the heads of
        a layer.
    keep_decoded : bool or None
        Keep a decoded copy of the coded tokens (more memory, labelled in
        :meth:`memory_report`). With ``attention="codes"`` the copy holds the looked-up
        values (centroids, sign values; rotated space, float32) and the code-reading
        attention reads it instead of the codes — the same numbers, so greedy outputs are
        identical: the speed comparison of looking codes up against reading floats. With
        ``attention="model"`` it holds the decoded keys and values given to the model's
        attention. None (default): False with ``attention="codes"``, True with "model"
        (False there decodes the held codes on every read instead: one decode call, or
        one per decode step for Haar rotations, klt and fp8/nvfp4's per-call scale). kivi/qjl with
        ``attention="codes"`` have no looked-up values to copy: True is refused there.
    config : transformers PretrainedConfig, optional
        The model's config, as ``DynamicCache(config=...)`` takes it: its sliding-window
        (and chunked-attention) layers then hold only the tokens their attention can
        still read — the last ``sliding_window − 1``, plus up to ``max(16, W/32)`` (or a
        token group, or a coded chunk) more before a drop — and memory stops growing
        there (a drop is made at the start of an update, so right after a long prefill
        the layer still holds all of it); dropped tokens are not held anywhere, and a
        :meth:`crop` back into them is refused. Without it every layer keeps every
        token, which the model's masks hide from a sliding-window layer: the same
        attention, more memory. A config with layers whose cache holds other states (a
        sparse-attention indexer's keys, a recurrent or convolution state) is a ValueError
        that names them.
    attention : {"codes", "model"} or None
        Who computes decode-step attention: ``"codes"`` (default for the schemes with a
        code-reading path, kivi and qjl included) —
        :func:`~kvstats.models.code_attention.code_attention`, through the wrapped eager/sdpa
        functions; ``"model"`` (the only choice for identity, Haar rotations and the other
        numpy-only schemes) — ``update`` returns decoded tensors to the model's own
        attention, any implementation (flash, sliding windows, soft-capping). One step
        agrees to float32 rounding; a quantized cache amplifies such a difference (a new
        key's coordinate on a code boundary gets another code), so over a few dozen steps
        their logits can differ by O(1), as two draws of the quantizer would, and their
        greedy outputs part (docs/benchmarks.md).
    **scheme_params
        Passed to :func:`kvstats.make_scheme` (e.g. ``rotation="haar"``,
        ``group_size=32``). For ``kivi`` the scheme's own ``residual`` is 0: the cache's
        ``window`` plays that role (a non-zero ``residual`` is a ValueError naming ``window``).

    Attributes
    ----------
    reads_codes : bool
        Whether the scheme has a code-reading path (per-vector and exportable, or kivi/qjl).
    grouped : bool
        Coded by kivi's or qjl's coders (token-grouped codes read by :mod:`kvstats.models.group_codes`).
        Such a scheme's declared token group must be a multiple of its key coder's
        ``group_size`` (a ValueError otherwise, naming both).
    attention : str
        ``"codes"`` or ``"model"`` (resolved).

    Examples
    --------
    >>> import torch
    >>> from kvstats.models import QuantizedCache
    >>> cache = QuantizedCache("KQV", 4, seed=0)
    >>> k = torch.randn(1, 3, 10, 64); v = torch.randn(1, 3, 10, 64)
    >>> _ = cache.update(k, v, layer_idx=0)
    >>> cache.get_seq_length(), cache.layers[0].dequantized()[0].shape
    (10, torch.Size([1, 3, 10, 64]))
    >>> rep = cache.memory_report()
    >>> rep["attention"], rep["bytes_per_token"], rep["held_bytes"] == rep["stored_bytes"]
    ('codes', 210.0, True)
    """

    def __init__(self, scheme_name: str, bits=None, seed: int = 0, window: int = 0, *,
                 per_head: bool = True, keep_decoded: bool | None = None, attention: str | None = None,
                 config=None, **scheme_params):
        from kvstats.quant.schemes import make_scheme

        self.sliding_windows, self.config_layers = _sliding_windows(config)
        self.scheme_name, self.bits = scheme_name, bits
        self.seed = check_int(seed, "seed", low=0)
        self.window = check_int(window, "window", low=0)
        if not isinstance(per_head, bool):
            raise TypeError(f"per_head must be a bool; received {per_head!r}")
        if keep_decoded is not None and not isinstance(keep_decoded, bool):
            raise TypeError(f"keep_decoded must be None or a bool; received {keep_decoded!r}")
        self.per_head = per_head
        params = dict(scheme_params)
        taken = sorted(set(params) & {"name", "dim", "draws"})
        if taken:
            # make_scheme's own arguments, which the cache sets per layer (draws: one per KV
            # head); "draws" passed the probe below and failed at the first update, inside a
            # forward pass, with Python's "multiple values for keyword argument"
            raise ValueError(f"scheme_params must not hold {taken}: the cache sets them (the scheme is "
                             f"scheme_name, dim the model's head dimension, draws one per KV head: see "
                             f"per_head); received { {k: params[k] for k in taken} }")
        sdef, _ = parse_scheme_name(scheme_name, params)
        if "residual" in sdef.params:  # a scheme's own fp window (kivi): the cache's window plays it
            if params.get("residual", 0) != 0:
                # silently dropping it would run without the full-precision tokens asked for
                raise ValueError(f"residual must be 0 (or absent) for a cache: its window plays the "
                                 f"{scheme_name!r} residual; received residual={params['residual']!r}: use "
                                 f"QuantizedCache({scheme_name!r}, ..., window={params['residual']!r})")
            params["residual"] = 0
        self.scheme_params = params
        _, parsed = parse_scheme_name(scheme_name, params)
        # Tokens sharing stored statistics are coded in whole groups (1: per vector).
        self.token_group = sdef.token_group(parsed)
        # One scale per encode call (scale="tensor"): the rows of a batch would share it
        # (checked at the first update, which sees the batch), the setting to use instead.
        self.per_call = sdef.per_trial_setting(parsed) if sdef.couples_trials(parsed) else ""
        self._make_scheme = make_scheme
        # Schemes without random components need no per-head draws.
        self.deterministic = not sdef.randomized(parsed)
        # Fail now, not inside a forward pass: unknown names, bad bits or parameters. The
        # head dimension comes with the first update, which checks the parameters bounded
        # by it (n_outliers, rank <= dim) against the model's; the probe takes a dimension
        # that admits them (at 64, n_outliers=80 was refused for a 128-dimensional model).
        probe_dim = 64
        for bounded in ("n_outliers", "rank"):
            value = params.get(bounded)
            if isinstance(value, int) and not isinstance(value, bool) and probe_dim <= value <= 4096:
                probe_dim = 1 << value.bit_length()
        probe = make_scheme(scheme_name, bits, probe_dim, seed=0, **params)
        # kivi's and qjl's coders (by type, whatever the scheme's name): numpy-coded whole
        # groups, read from torch buffers (group_codes)
        self.grouped = grouped_kind(probe) is not None
        if self.grouped:
            _check_token_group(scheme_name, sdef, self.token_group, probe.key_coder)
        self.reads_codes = self.grouped or (sdef.gpu and self.token_group == 1 and _exports(probe))
        if attention is None:
            attention = "codes" if self.reads_codes else "model"
        if attention not in ("codes", "model"):
            raise ValueError(f"attention must be None, 'codes' or 'model'; received {attention!r}"
                             f"{did_you_mean(attention, ('codes', 'model'))}")
        if attention == "codes" and not self.reads_codes:
            exporting = ", ".join(name for name, d in REGISTRY.items() if d.gpu)
            raise ValueError(f"attention='codes' needs a per-vector scheme that exports ({exporting}; "
                             f"Hadamard or no rotation) or kivi's or qjl's coders; received "
                             f"{scheme_name!r} with {params}: use attention='model'")
        self.attention = attention
        self.warned_uncoded = False  # UncodedTokensWarning issued (once per cache)
        self.keep_decoded = (attention == "model") if keep_decoded is None else keep_decoded
        if self.grouped and attention == "codes" and self.keep_decoded:
            raise ValueError(f"keep_decoded=True with attention='codes' keeps the looked-up values of "
                             f"per-vector schemes; {scheme_name!r} has none: use attention='model' for "
                             f"a decoded copy")
        if attention == "codes":
            install()
        super().__init__(layer_class_to_replicate=self._new_layer)

    def _not_attention(self, what: str):
        raise NotImplementedError(
            f"QuantizedCache holds attention layers only; the model asked for {what} (a linear-attention, "
            "state-space or indexer layer of a hybrid model): use transformers' DynamicCache(config=model.config)")

    def get_conv_state(self, layer_idx: int, state_idx: int = 0):
        """Not held (hybrid models' non-attention layers): NotImplementedError.

        Examples
        --------
        >>> QuantizedCache("KQV", 4).get_conv_state(0)
        Traceback (most recent call last):
        ...
        NotImplementedError: QuantizedCache holds attention layers only; the model asked for a convolution state ...
        """
        self._not_attention("a convolution state")

    def update_conv_state(self, conv_states, layer_idx: int, state_idx: int = 0, **kwargs):
        """Not held (hybrid models' non-attention layers): NotImplementedError.

        Examples
        --------
        >>> QuantizedCache("KQV", 4).update_conv_state(None, 0)
        Traceback (most recent call last):
        ...
        NotImplementedError: QuantizedCache holds attention layers only; the model asked for a convolution state ...
        """
        self._not_attention("a convolution state")

    def get_recurrent_state(self, layer_idx: int, state_idx: int = 0):
        """Not held (hybrid models' non-attention layers): NotImplementedError.

        Examples
        --------
        >>> QuantizedCache("KQV", 4).get_recurrent_state(0)
        Traceback (most recent call last):
        ...
        NotImplementedError: QuantizedCache holds attention layers only; the model asked for a recurrent state ...
        """
        self._not_attention("a recurrent state")

    def update_recurrent_state(self, recurrent_states, layer_idx: int, state_idx: int = 0, **kwargs):
        """Not held (hybrid models' non-attention layers): NotImplementedError.

        Examples
        --------
        >>> QuantizedCache("KQV", 4).update_recurrent_state(None, 0)
        Traceback (most recent call last):
        ...
        NotImplementedError: QuantizedCache holds attention layers only; the model asked for a recurrent state ...
        """
        self._not_attention("a recurrent state")

    def update_indexer(self, indexer_key_states, layer_idx: int):
        """Not held (hybrid models' non-attention layers): NotImplementedError.

        Examples
        --------
        >>> QuantizedCache("KQV", 4).update_indexer(None, 0)
        Traceback (most recent call last):
        ...
        NotImplementedError: QuantizedCache holds attention layers only; the model asked for indexer keys ...
        """
        self._not_attention("indexer keys")

    def get_max_length(self, layer_idx: int | None = None) -> int:
        """The most tokens a layer's attention reads: its sliding window (from ``config``), or
        -1 (no bound) for a full-attention layer; ``layer_idx=None``: the largest over the
        layers, as transformers' caches take it (-1 when every layer is unbounded).

        Known before any update (the layers are built on their first one): transformers'
        own ``Cache`` takes ``max()`` over the layers built so far, a ValueError on a new
        cache without a config.

        Examples
        --------
        >>> cache = QuantizedCache("KQV", 4)
        >>> cache.get_max_length(), cache.get_max_length(3), cache.get_seq_length(), cache.get_mask_sizes(5, 0)
        (-1, -1, 0, (5, 0))
        """
        n_layers = max(len(self.layers), self.config_layers)
        if layer_idx is None:
            return max((self.sliding_windows.get(i, -1) for i in range(n_layers)), default=-1)
        check_int(layer_idx, "layer_idx", low=0)
        return self.sliding_windows.get(layer_idx, -1)

    def _new_layer(self) -> _CodesLayer:
        return _CodesLayer(self, len(self.layers))

    def _make(self, dim, seed, draws):
        scheme = self._make_scheme(self.scheme_name, self.bits, dim, seed=seed, draws=draws,
                                   **self.scheme_params)
        # its draws are made at construction: the SeedSequence (a C object whose pool is a
        # 16-byte array no walk of __dict__ sees) is not needed after, so not held
        scheme.seed = None
        return scheme

    def __repr__(self) -> str:
        return (f"QuantizedCache({self.scheme_name!r}, bits={self.bits}, window={self.window}, "
                f"layers={len(self.layers)}, seq_length={self.get_seq_length()})")


def _sliding_windows(config) -> tuple[dict[int, int], int]:
    """``{layer: window}`` of a model config's sliding-window and chunked-attention layers
    (transformers' reading of ``layer_types`` / ``sliding_window``, as DynamicCache's), and
    the config's number of layers (0 without a config).

    A config with layers whose cache holds more than keys and values (an indexer's keys,
    a recurrent or convolution state) is refused here, before any forward pass."""
    if config is None:
        return {}, 0
    from transformers.cache_utils import (DYNAMIC_LAYER_TYPE_MAPPING, DummyLayer, DynamicLayer,
                                          DynamicSlidingWindowLayer, get_layer_types_and_kwargs)

    if not hasattr(config, "get_text_config"):
        raise TypeError(f"config must be a transformers model config (model.config); received "
                        f"{type(config).__name__}")
    text = config.get_text_config(decoder=True)
    types, kwargs = _with_loop_copies(text, *get_layer_types_and_kwargs(text))
    # these two hold keys and values only: the layers a QuantizedCache layer stands in for
    # (DummyLayer: a layer that reuses another's); their subclasses hold more (indexed, hybrid)
    held = (DynamicLayer, DynamicSlidingWindowLayer, DummyLayer)
    # a type a modeling module registers when imported (DeepSeek-V4's compressed layers)
    # is unknown before: DynamicCache(config) then fails with a KeyError, and it was taken here
    # for keys and values, then refused once the model was loaded
    unknown = sorted({t for t in types if t not in DYNAMIC_LAYER_TYPE_MAPPING})
    if unknown:
        raise ValueError(f"config must describe layer types transformers' caches know: "
                         f"{getattr(text, 'model_type', type(text).__name__)!r} has layers of type "
                         f"{', '.join(map(repr, unknown))}, registered when the model's modeling module is "
                         f"imported (load the model first); QuantizedCache holds keys and values only")
    other = sorted({t for t in types if DYNAMIC_LAYER_TYPE_MAPPING[t] not in held})
    if other:
        layers = [i for i, t in enumerate(types) if t in other]
        raise ValueError(f"config must describe attention layers only (keys and values): "
                         f"{getattr(text, 'model_type', type(text).__name__)!r} has layers of type "
                         f"{', '.join(map(repr, other))} (layers {layers}), whose cache holds other states "
                         f"(an indexer's keys, a recurrent or convolution state) that QuantizedCache does not "
                         f"hold: use transformers' DynamicCache(config=model.config)")
    windows = {i: int(kw["sliding_window"]) for i, (t, kw) in enumerate(zip(types, kwargs))
               if t in ("sliding_attention", "chunked_attention") and kw.get("sliding_window")}
    return windows, len(types)


def _with_loop_copies(text, types: list, kwargs: list) -> tuple[list, list]:
    """The layer types and kwargs of a model whose recurrent section runs several loops
    (transformers' Dory: ``n_recurrent_loops``, ``recurrent_kv_cache_mode``).

    ``"per_loop"``: each loop past the first writes to its own copies of the recurrent
    layers, cache layers ``num_hidden_layers + (loop − 1)·n_recurrent + j``: layers of the
    same types (a copy of a sliding-window layer drops as the layer it copies, so the
    mask the model sizes from the first holds for both). ``"last_loop"``: the earlier loops
    read each recurrent layer's held states cut to the last ``W − 1`` under that mask,
    which a sliding-window layer here (holding up to ``max(16, W/32)`` tokens more before a
    drop) does not fit: refused when the recurrent section has sliding-window layers, and
    always where the model reads that past through its own wrapper (transformers ≥ 5.25)."""
    mode, loops = getattr(text, "recurrent_kv_cache_mode", None), getattr(text, "n_recurrent_loops", 1)
    if mode is None or loops < 2:
        return types, kwargs
    start, stop = text.n_input_layers, text.n_input_layers + text.n_recurrent_layers
    if mode == "per_loop":
        return types + types[start:stop] * (loops - 1), kwargs + kwargs[start:stop] * (loops - 1)
    if _reads_past_through_wrapper():
        import transformers

        raise ValueError(f"config must not use recurrent_kv_cache_mode={mode!r} with transformers "
                         f"{transformers.__version__}: the model's earlier loops read the recurrent layers' "
                         f"past through its DoryPastReader, which wraps transformers' own cache layers only; "
                         f"use recurrent_kv_cache_mode='per_loop' (or transformers' DynamicCache(config=...))")
    sliding = [i for i in range(start, stop) if types[i] in ("sliding_attention", "chunked_attention")]
    if sliding:
        raise ValueError(f"config must not combine recurrent_kv_cache_mode={mode!r} with sliding-window layers "
                         f"in the recurrent section (layers {sliding}): its earlier loops read a layer's past "
                         f"cut to the window under the mask of a cache holding only the window, and a "
                         f"QuantizedCache holds a few tokens more before each drop; use "
                         f"recurrent_kv_cache_mode='per_loop' (or transformers' DynamicCache(config=...))")
    return types, kwargs


def _reads_past_through_wrapper() -> bool:
    """Whether transformers' Dory reads a ``"last_loop"`` model's past through its
    ``DoryPastReader`` (transformers 5.25 on), which accepts transformers' own layer
    types only; before, it read each cache layer's ``keys`` and ``values``."""
    try:
        from transformers.models.dory import modeling_dory
    except ImportError:
        return False
    return hasattr(modeling_dory, "DoryPastReader")


def _check_token_group(scheme_name: str, sdef, token_group: int, key_coder) -> None:
    """Refuse a scheme coded by kivi's or qjl's coders whose declared token group is not a
    whole number of its key coder's groups (``group_size`` tokens share the keys' stored
    statistics).

    The declaration (``define_scheme``'s ``token_group_param``/``token_group_default``) is
    the one the contract and a sweep read, so it is checked here, not replaced by the
    coder's: the cache codes, and drops, whole declared groups, and the grouped reads
    (:mod:`kvstats.models.group_codes`) view the codes as whole key groups. A group of 1
    with coders grouping 8 tokens passed ``update`` and failed every later read with a
    RuntimeError about a view's shape; on ``attention="model"`` it coded each token with
    statistics of its own, another scheme than the coders give a sweep. A multiple (16 for
    8) codes the same whole key groups, two at a time.

    Examples
    --------
    >>> import kvstats
    >>> from kvstats.quant.registry import scheme_def
    >>> coder = kvstats.make_scheme("kivi", 2, 64, residual=0, group_size=8).key_coder
    >>> _check_token_group("kivi", scheme_def("kivi"), 16, coder)    # two key groups of 8: accepted
    >>> _check_token_group("kivi", scheme_def("kivi"), 4, coder)
    Traceback (most recent call last):
    ...
    ValueError: scheme 'kivi' declares a token group of 4 (its parameter 'group_size'), but ... multiple of 8; ...
    """
    group = key_coder.group_size
    if token_group % group == 0:
        return
    where = (f"its parameter {sdef.token_group_param!r}" if sdef.token_group_param is not None
             else "no token_group_param: tokens coded one by one")
    raise ValueError(
        f"scheme {scheme_name!r} declares a token group of {token_group} ({where}), but its key coder "
        f"{type(key_coder).__name__} shares statistics over group_size={group} tokens: a cache codes "
        f"whole declared groups and reads the codes as whole key groups, so the token group must be a "
        f"multiple of {group}; declare define_scheme's token_group_param (or token_group_default) as "
        f"the coder's group_size, or build the coders with a group_size dividing {token_group}")


def _exports(scheme) -> bool:
    """Whether the scheme's parameters export (a Haar rotation, for one, does not)."""
    try:
        scheme.export()
    except ValueError:
        return False
    return True
