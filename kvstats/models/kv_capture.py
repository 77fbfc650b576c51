"""Capture the real KV cache and the post-RoPE queries of a Llama-architecture model.

Keys and values are read from the transformers ``DynamicCache`` after one prefill pass:
exactly what the cache stores (post-RoPE keys, values). Queries are not cached by the
model, so a forward pre-hook on every attention module recomputes them from the
module's own input: ``q_proj(hidden) -> heads -> RoPE(cos, sin)`` with the position
embeddings the module receives. ``tests/models`` checks that
``softmax(q K^T / sqrt(d) + causal mask) V`` from the captured arrays reproduces the
attention module's output (the input of ``o_proj``) to float tolerance.

Every text is truncated to a common number of tokens ``N`` so that captures stack into
arrays; the tokens used are recorded in the metadata. ``layers=`` keeps only some layers
(hooks on those alone, arrays of those alone); ``meta["layers"]`` then records which, so
that selections by model layer read the right slots (:mod:`kvstats.data.capture_format`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kvstats._checks import check_int
from kvstats.data.capture_format import FORMAT, FORMAT_VERSION, LAYERS, write_capture
from kvstats.models.texts import check_context, check_distinct


@dataclass(frozen=True)
class Capture:
    """Captured post-RoPE keys, values and queries of a batch of texts.

    Attributes
    ----------
    K, V : ndarray, float32, ``(n_texts, n_layers, n_kv_heads, N, d)``
        What the KV cache stores for each text, captured layer and KV head (slot ``i``
        of axis 1 is model layer ``meta["layers"][i]`` when only some were captured).
    q : ndarray, float32, ``(n_texts, n_layers, n_q_heads, N, d)``
        Post-RoPE queries; query head ``h`` reads KV head ``h // group``
        (``group = n_q_heads // n_kv_heads``, as in transformers' ``repeat_kv``).
    meta : dict
        model (a name, never a local path), source, texts, token ids, N, group size,
        versions, the capture format's version (``format``), the environment that shapes
        the floats' last bits (``env``, :func:`capture_env`); ``weights`` (the weights
        file's package, version and SHA-256) for :func:`~kvstats.models.load_model`'s
        model; ``layers`` (the model layer of each slot) when ``capture`` kept only some.
    attn_out : ndarray or None, ``(n_texts, n_layers, n_q_heads, N, d)``
        The attention module's output before ``o_proj`` (only with
        ``attention_output=True``; used to verify the capture).

    Examples
    --------
    What :func:`capture` returns, here built by hand: 1 text, 2 layers, 2 KV heads read by
    6 query heads (query head ``h`` reads KV head ``h // 3``), 4 tokens, d = 8.

    >>> import numpy as np
    >>> K = V = np.zeros((1, 2, 2, 4, 8), np.float32)
    >>> q = np.zeros((1, 2, 6, 4, 8), np.float32)
    >>> cap = Capture(K, V, q, {"group_size": 3, "n_tokens": 4})
    >>> cap.K.shape, cap.q.shape[2] // cap.meta["group_size"], cap.attn_out is None
    ((1, 2, 2, 4, 8), 2, True)
    """

    K: np.ndarray
    V: np.ndarray
    q: np.ndarray
    meta: dict = field(default_factory=dict)
    attn_out: np.ndarray | None = None

    def save(self, path: str | os.PathLike) -> Path:
        """Write the capture as ``.npz`` (``K``, ``V``, ``q`` and a JSON ``meta`` string; the
        format is :mod:`kvstats.data.capture_format`) and return the path written: ``path``,
        with ``.npz`` appended when it has another ending (as numpy's ``savez`` does).

        Examples
        --------
        >>> import numpy as np
        >>> from kvstats.models.kv_capture import Capture
        >>> z = np.zeros((1, 1, 1, 2, 4), np.float32)
        >>> c = Capture(z, z, z, {"group_size": 1})
        >>> import tempfile, os
        >>> p = c.save(os.path.join(tempfile.mkdtemp(), "cap.npz"))
        >>> sorted(np.load(p).files)
        ['K', 'V', 'meta', 'q']
        >>> c.save(os.path.join(tempfile.mkdtemp(), "cap")).name    # what numpy writes
        'cap.npz'
        """
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike; received {type(path).__name__}")
        path = Path(path)
        # np.savez appends .npz to any other name: return the file it writes (was: the name
        # given, a file that does not exist)
        if path.suffix != ".npz":
            path = path.with_name(path.name + ".npz")
        path.parent.mkdir(parents=True, exist_ok=True)
        write_capture(path, self.K, self.V, self.q, self.meta)
        return path


def model_name_of(model) -> str:
    """The model's name as a capture records it (``meta["model"]``): never a local path.

    :func:`~kvstats.models.load_model`'s model gives its name (``"SmolLM2-135M-Instruct"``;
    its weights file and hash are ``meta["weights"]``); another gives its hub id
    (``config._name_or_path``), or the last part of that path where it names a local
    folder, else its class name. A path would make two captures of one model differ
    (and so their content fingerprints) by where the weights were cached.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from kvstats.models.kv_capture import model_name_of
    >>> model_name_of(SimpleNamespace(config=SimpleNamespace(_name_or_path="HuggingFaceTB/SmolLM2-135M")))
    'HuggingFaceTB/SmolLM2-135M'
    >>> model_name_of(SimpleNamespace(config=SimpleNamespace(_name_or_path="/home/me/models/tiny-llama/")))
    'tiny-llama'
    """
    name = getattr(model, "_kvstats_name", None)
    if name:
        return str(name)
    path = str(getattr(getattr(model, "config", None), "_name_or_path", "") or "")
    if path and (os.path.isabs(path) or path.startswith((".", "~")) or os.path.exists(path)):
        path = os.path.basename(os.path.normpath(os.path.expanduser(path)))  # a local folder: its name
    return path or type(model).__name__


def capture_env(model, batch_size: int) -> dict:
    """What shapes a capture's floats beyond its model and texts (``meta["env"]``).

    A capture is bit-identical across reruns on one machine (and across 1 or 2 threads
    and batch sizes, measured on 2026-12-04), but another CPU kernel path changes the last
    bits of K, V and q (forcing ATen's AVX2 kernels on an AVX-512 machine moved them by
    about 1e-6 of their largest values), and with them every CRC-32 and both fingerprints.
    Recorded: ``cpu`` (the model name in /proc/cpuinfo, as the look-up kernel reads it;
    else ``platform.processor()``), ``cpu_capability`` (the kernels torch dispatches to,
    ``torch.backends.cpu.get_cpu_capability()``), numpy's BLAS and SIMD
    (:func:`kvstats.sweep.numeric_env.numeric_env`: ``machine``, ``simd``, ``blas``,
    ``blas_core``), ``torch_threads``, ``attn_implementation`` (the model config's),
    ``numpy`` and ``gguf`` versions (python, torch and transformers are top-level keys of
    ``meta``), ``kvstats_revision`` (the checkout's commit and whether it was edited, as the
    sweep's manifest records it; None for an installed kvstats) and ``batch_size``.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from kvstats.models.kv_capture import capture_env
    >>> env = capture_env(SimpleNamespace(config=SimpleNamespace(_attn_implementation="eager")), 4)
    >>> env["attn_implementation"], env["batch_size"], isinstance(env["torch_threads"], int)
    ('eager', 4, True)
    >>> sorted(env)[:4]
    ['attn_implementation', 'batch_size', 'blas', 'blas_core']
    """
    import platform
    from importlib import metadata

    import torch

    from kvstats.models.lut_kernel import _cpu_id
    from kvstats.sweep.numeric_env import numeric_env
    from kvstats.sweep.store import _git_revision

    batch_size = check_int(batch_size, "batch_size", low=1)
    cpu = [line.split(":", 1)[1].strip() for line in _cpu_id().splitlines()
           if line.startswith("model name") and ":" in line]
    try:
        gguf = metadata.version("gguf")
    except metadata.PackageNotFoundError:
        gguf = None
    return {"cpu": (cpu[0] if cpu else "") or platform.processor() or "unknown",
            "cpu_capability": str(torch.backends.cpu.get_cpu_capability()),
            **numeric_env(), "torch_threads": torch.get_num_threads(),
            "attn_implementation": getattr(getattr(model, "config", None), "_attn_implementation", None),
            "numpy": np.__version__, "gguf": gguf, "kvstats_revision": _git_revision(),
            "batch_size": batch_size}


def _rotate_half(x):
    import torch

    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _decoder_layers(model):
    try:
        layers = model.model.layers
        attn0 = layers[0].self_attn
    except (AttributeError, IndexError, TypeError) as exc:
        raise TypeError("model must be a Llama-architecture transformers model with "
                        f"model.model.layers[i].self_attn; received {type(model).__name__}") from exc
    for name in ("q_proj", "o_proj", "head_dim", "layer_idx"):
        if not hasattr(attn0, name):
            raise TypeError(f"model's attention modules must have {name!r} (Llama architecture); "
                            f"{type(attn0).__name__} has not")
    # The recomputed query is q_proj -> heads -> RoPE, and the trials read it as
    # softmax(q·k/√d): a query/key norm (Qwen3, OLMo2, Gemma3) or another logit scale
    # (Granite, Gemma) would make the captured queries silently not the model's.
    import torch

    for layer in layers:
        attn = layer.self_attn
        norms = [n for n in ("q_norm", "k_norm", "q_layernorm", "k_layernorm")
                 if isinstance(getattr(attn, n, None), torch.nn.Module)]
        if norms:
            raise ValueError(f"model must be a Llama-architecture model (queries q_proj -> RoPE); "
                             f"{type(attn).__name__} (layer {attn.layer_idx}) applies {norms} "
                             f"before attention, which capture does not recompute")
        scaling = getattr(attn, "scaling", None)
        if scaling is not None and not np.isclose(float(scaling), attn.head_dim ** -0.5, rtol=1e-6):
            raise ValueError(f"model must be a Llama-architecture model scaling attention logits by "
                             f"1/sqrt(head_dim) = {attn.head_dim ** -0.5:.6g}; {type(attn).__name__} "
                             f"(layer {attn.layer_idx}) scales them by {float(scaling):.6g}")
    return layers


def _recheck(q, K, V, A, group: int, tol: float, model_name: str, model_layers=None) -> None:
    """Refuse a capture whose arrays do not reproduce the attention modules' outputs:
    ``softmax(q Kᵀ/√d + causal) V`` from the captured arrays of one text, every captured
    layer (float64), against each module's input of ``o_proj``, to ``tol`` relative to that
    layer's largest output. Catches what the structural checks cannot see (an interleaved
    RoPE, a sliding window, attention sinks). ``model_layers``: the model layer of each
    slot, for the message (default: slot i is layer i)."""
    d, n = q.shape[-1], q.shape[-2]
    causal = np.triu(np.ones((n, n), bool), 1)
    err = np.empty(len(A))
    for layer in range(len(A)):  # one layer at a time: (heads, n, n) float64 scores
        s = np.einsum("hnd,hmd->hnm", q[layer].astype(np.float64),
                      np.repeat(K[layer].astype(np.float64), group, axis=0)) / np.sqrt(d)
        s[:, causal] = -np.inf
        p = np.exp(s - s.max(-1, keepdims=True))
        out = (p / p.sum(-1, keepdims=True)) @ np.repeat(V[layer].astype(np.float64), group, axis=0)
        err[layer] = np.abs(out - A[layer]).max() / max(np.abs(A[layer]).max(), np.finfo(np.float32).tiny)
    bad = np.flatnonzero(err > tol)
    if model_layers is not None:
        bad = np.asarray(model_layers)[bad]
    if bad.size:
        raise ValueError(f"model must compute attention as softmax(q·k/√d + causal mask)·v over the cached keys "
                         f"with queries q_proj -> RoPE (Llama architecture): for {model_name} the captured "
                         f"arrays do not reproduce the attention output of layers {bad[:8].tolist()} "
                         f"(largest relative error {err.max():.3g} > {tol:g})")


def _kept_layers(layers, n_layers: int) -> list[int]:
    """``capture``'s ``layers``: every layer for None, else distinct layers of the model, sorted."""
    if layers is None:
        return list(range(n_layers))
    if isinstance(layers, (str, bytes)) or not hasattr(layers, "__iter__"):
        raise TypeError(f"layers must be None or a sequence of model layers in [0, {n_layers - 1}]; "
                        f"received {layers!r}")
    kept = [check_int(i, "layers") for i in layers]
    if not kept or len(set(kept)) != len(kept) or not all(0 <= i < n_layers for i in kept):
        raise ValueError(f"layers must be distinct model layers in [0, {n_layers - 1}] (the model has "
                         f"{n_layers}), at least one; received {list(layers)!r}")
    return sorted(kept)


def tokenize_texts(tokenizer, texts, max_tokens=None, context=None) -> tuple[list[list[int]], int]:
    """Tokenize ``texts`` and choose the common length ``N``.

    ``N = max_tokens`` if given (every text must have at least that many tokens), else the
    length of the shortest text. ``N`` above ``context`` is an error
    (:func:`~kvstats.models.texts.check_context`), and so are two texts equal in their
    first ``N`` tokens (:func:`~kvstats.models.texts.check_distinct`: each text is one
    independent unit of the tests).

    Examples
    --------
    >>> class Tok:                       # a word-length tokenizer, for illustration
    ...     def __call__(self, t, add_special_tokens=True):
    ...         return {"input_ids": [len(w) for w in t.split()]}
    >>> from kvstats.models.kv_capture import tokenize_texts
    >>> tokenize_texts(Tok(), ["one two three", "four five"])
    ([[3, 3], [4, 4]], 2)
    """
    if isinstance(texts, str) or not hasattr(texts, "__len__"):
        raise TypeError(f"texts must be a list of strings; received {type(texts).__name__}")
    if len(texts) == 0:
        raise ValueError("texts must contain at least one string; received an empty list")
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str) or not t.strip()]
    if bad:
        raise TypeError(f"texts must be non-empty strings; items {bad[:5]} are not")
    ids = [list(tokenizer(t, add_special_tokens=True)["input_ids"]) for t in texts]
    lengths = [len(x) for x in ids]
    if max_tokens is None:
        n = min(lengths)
    else:
        n = check_int(max_tokens, "max_tokens", low=2)
        short = [(i, l) for i, l in enumerate(lengths) if l < n]
        if short:
            raise ValueError(f"max_tokens={n} but texts {[i for i, _ in short][:10]} have only "
                             f"{[l for _, l in short][:10]} tokens; every text must have at least "
                             "max_tokens tokens (choose longer texts or a smaller max_tokens)")
    if n < 2:
        raise ValueError(f"texts must have at least 2 tokens each; the shortest has {n}")
    check_context([n] * len(ids), context, f"texts (each truncated to N={n} tokens)",
                  f"pass max_tokens <= {context}")
    out = [x[:n] for x in ids]
    check_distinct(out, f"texts (each truncated to N={n} tokens)")
    return out, n


def capture(model, tokenizer, texts, max_tokens=None, *, layers=None, path=None, batch_size=4,
            attention_output=False, progress: bool = False) -> Capture:
    """Run ``texts`` through ``model`` and capture the K, V and queries of every layer (or of ``layers``).

    Parameters
    ----------
    model, tokenizer
        From :func:`kvstats.models.load_model` (any Llama-architecture model works).
    texts : list of str
        Each is tokenized (with the tokenizer's special tokens) and truncated to ``N``
        tokens; see :func:`tokenize_texts`.
    max_tokens : int, optional
        Common token count ``N`` (default: the shortest text's length).
    layers : sequence of int, optional
        The model layers to keep (default: all), stored in increasing order and recorded
        as ``meta["layers"]``; readers select by model layer (layer 15 of a capture of
        ``[0, 15, 29]`` is model layer 15). Only these layers are hooked and held while
        capturing. SmolLM2's 30 layers of 26 texts x 256 tokens take 767 MB; three, a tenth.
    path : path, optional
        If given, the capture is also written there as ``.npz`` (:meth:`Capture.save`;
        ``.npz`` is appended to a name that does not end with it).
    batch_size : int
        Texts per forward pass (memory vs speed; results do not depend on it).
    attention_output : bool
        Also record each attention module's output before ``o_proj``.
    progress : bool
        A progress bar (stderr) over the batches (26 texts of 256 tokens take minutes on
        a CPU).

    Returns
    -------
    Capture
        float32 arrays; see :class:`Capture`.

    Raises
    ------
    ValueError
        Too-short texts, ``N`` beyond the model's context, texts repeated (equal in
        their first ``N`` tokens), bad ``batch_size``, ``layers``
        empty, repeated or outside ``[0, n_layers - 1]``; a model
        whose attention is not Llama's (query/key norms, another logit scale, partial
        RoPE, sliding windows): the first text's arrays are checked to reproduce every
        captured attention module's output (1e-3 relative for float32 models, 2e-2 for
        16-bit).

    Examples
    --------
    >>> from kvstats.models import load_model, capture
    >>> from kvstats.models.texts import stdlib_texts
    >>> model, tok = load_model()                                   # doctest: +SKIP
    >>> cap = capture(model, tok, stdlib_texts()[:2], max_tokens=64)  # doctest: +SKIP
    >>> cap.K.shape, cap.q.shape                                    # doctest: +SKIP
    ((2, 30, 3, 64, 64), (2, 30, 9, 64, 64))
    >>> few = capture(model, tok, stdlib_texts()[:2], max_tokens=64, layers=[0, 15, 29])  # doctest: +SKIP
    >>> few.K.shape, few.meta["layers"]                             # doctest: +SKIP
    ((2, 3, 3, 64, 64), [0, 15, 29])
    """
    import torch
    from tqdm.auto import tqdm
    from transformers import DynamicCache

    blocks = _decoder_layers(model)
    kept = _kept_layers(layers, len(blocks))
    batch_size = check_int(batch_size, "batch_size", low=1)
    for flag, value in (("attention_output", attention_output), ("progress", progress)):
        if not isinstance(value, bool):  # "no" would have recorded the outputs
            raise TypeError(f"{flag} must be True or False; received {value!r}")
    if path is not None and not isinstance(path, (str, os.PathLike)):  # now, not after the run
        raise TypeError(f"path must be None, a str or os.PathLike; received {type(path).__name__}")
    cfg = model.config
    context = getattr(cfg, "max_position_embeddings", None)
    ids, n = tokenize_texts(tokenizer, texts, max_tokens, context)
    n_q = cfg.num_attention_heads
    n_kv = cfg.num_key_value_heads
    d = blocks[0].self_attn.head_dim
    T = len(ids)
    K = np.empty((T, len(kept), n_kv, n, d), np.float32)
    V = np.empty_like(K)
    Q = np.empty((T, len(kept), n_q, n, d), np.float32)
    A = np.empty_like(Q) if attention_output else None

    current = {}

    def q_hook(module, args, kwargs):
        hidden = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        cos, sin = kwargs["position_embeddings"]
        if cos.shape[-1] != module.head_dim:
            raise ValueError(f"model must rotate every query dimension (Llama's RoPE); {type(module).__name__} "
                             f"rotates {cos.shape[-1]} of {module.head_dim} (partial rotary), which capture "
                             f"does not recompute")
        b, t, _ = hidden.shape
        q = module.q_proj(hidden).view(b, t, -1, module.head_dim).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        # RoPE written out here (not borrowed from the model) so that the recomputation
        # test checks it independently.
        q = q * cos + _rotate_half(q) * sin
        current["q"][module.layer_idx] = q.float().numpy()

    def o_hook(layer_idx):
        def hook(module, args):
            x = args[0]
            b, t, _ = x.shape
            current["a"][layer_idx] = x.view(b, t, n_q, d).transpose(1, 2).float().numpy()
        return hook

    # the o_proj inputs are recorded on every batch with attention_output, else on the
    # first (the check of the recomputation); only the kept layers are hooked, so the
    # others' queries are never computed nor held
    handles = [blocks[i].self_attn.register_forward_pre_hook(q_hook, with_kwargs=True) for i in kept]
    handles += [blocks[i].self_attn.o_proj.register_forward_pre_hook(o_hook(i)) for i in kept]
    model_name = f"{type(model).__name__} ({getattr(cfg, 'model_type', '?')}, {model.dtype})"
    bar = tqdm(total=T, desc="capture", unit="text", file=sys.stderr, disable=not progress)
    try:
        with torch.inference_mode():
            for start in range(0, T, batch_size):
                stop = min(T, start + batch_size)
                current["q"], current["a"] = {}, {}
                input_ids = torch.tensor(ids[start:stop], dtype=torch.long)
                cache = DynamicCache(config=cfg)
                model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), cache=cache,
                      use_cache=True)
                for slot, i in enumerate(kept):
                    if cache.layers[i].keys.shape[-2] != n:  # a sliding window kept fewer
                        raise ValueError(f"model must cache every token's key (full attention); layer {i} "
                                         f"of {model_name} keeps {cache.layers[i].keys.shape[-2]} of {n} "
                                         f"(a sliding window): capture needs N <= its window")
                    K[start:stop, slot] = cache.layers[i].keys.float().numpy()
                    V[start:stop, slot] = cache.layers[i].values.float().numpy()
                    Q[start:stop, slot] = current["q"][i]
                    if attention_output:
                        A[start:stop, slot] = current["a"][i]
                if start == 0:
                    a0 = np.stack([current["a"][i][0] for i in kept])
                    _recheck(Q[0], K[0], V[0], a0, n_q // n_kv,
                             1e-3 if model.dtype.itemsize >= 4 else 2e-2, model_name, kept)
                bar.update(stop - start)
    finally:
        bar.close()
        for h in handles:
            h.remove()

    import transformers

    meta = {
        FORMAT: FORMAT_VERSION,
        "model": model_name_of(model),
        # load_model's tag (while the model is its float32 one); another model is
        # described by its class, type and dtype
        "source": (model._kvstats_source if getattr(model, "_kvstats_source", None)
                   and model.dtype == torch.float32 else model_name),
        "n_texts": T, "n_layers": len(blocks), "n_q_heads": n_q, "n_kv_heads": n_kv,
        "group_size": n_q // n_kv, "head_dim": d, "n_tokens": n,
        "texts": list(texts), "token_ids": ids,
        "post_rope": True, "dtype": "float32",
        "python": sys.version.split()[0], "torch": torch.__version__,
        "transformers": transformers.__version__,
        # CPU, kernels, threads, BLAS, attention, revision, batch: a later capture whose
        # fingerprint differs says whether these did (read_header's arrays_fingerprint
        # says whether the floats did)
        "env": capture_env(model, batch_size),
    }
    if getattr(model, "_kvstats_weights", None):
        meta["weights"] = dict(model._kvstats_weights)  # load_model's: package, version, file, sha256
    if kept != list(range(len(blocks))):
        # which model layer each slot holds (a capture of every layer needs no record:
        # slot i is layer i, as in every capture before layer selection)
        meta[LAYERS] = kept
    out = Capture(K, V, Q, meta, A)
    if path is not None:
        out.save(path)
    return out
