"""Error messages that say where to look: a relative config path names the working
directory it was resolved against; a torch tensor numpy cannot take says how to pass it."""

import pytest

from kvstats.sweep.config import SweepConfig


def test_a_missing_relative_config_names_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=rf"'no/such.toml' does not exist \(relative to the working "
                                                rf"directory '{tmp_path}'\)"):
        SweepConfig.from_toml("no/such.toml")
    with pytest.raises(FileNotFoundError) as exc:
        SweepConfig.from_toml(tmp_path / "absent.toml")
    assert "working directory" not in str(exc.value)


def test_a_torch_bfloat16_tensor_is_refused_saying_how_to_pass_it():
    torch = pytest.importorskip("torch")
    from kvstats.metrics import snr_db

    x = torch.ones(4, 8).bfloat16()
    with pytest.raises(TypeError, match=r"x must be a numeric array \(a torch tensor numpy cannot take: "
                                        r"pass x.float\(\)\)"):
        snr_db(x, x)
    snr_db(x.float() + 1, x.float())   # the advice works
