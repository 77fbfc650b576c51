"""The smallest sweep config the command-line and report tests run: KQV against QKQV on
Gaussian keys at d = 16, N = 32 (seconds per sweep). One text, the settings that differ
between the tests as arguments."""


def tiny_toml(*, seed: int = 3, budgets: tuple[int, ...] = (2, 3), n_trials: int = 12,
              energy_resamples: int = 49, bootstrap_resamples: int = 99, report_extra: str = "") -> str:
    """The config's TOML; ``report_extra``: lines appended to its ``[report]`` table."""
    return f"""
[sweep]
seed = {seed}
budgets = [{", ".join(map(str, budgets))}]
dims = [16]
n_keys = [32]
n_trials = {n_trials}

[[schemes]]
name = "KQV"
[[schemes]]
name = "QKQV"

[[distributions]]
name = "gaussian"

[report]
comparisons = [["KQV", "QKQV"]]
energy_resamples = {energy_resamples}
bootstrap_resamples = {bootstrap_resamples}
{report_extra}"""
