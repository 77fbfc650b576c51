"""The smallest sweep config the command-line and report tests run: KQV against QKQV on
Gaussian keys at d = 16, N = 32 (seconds per sweep). One text, the settings that differ
between the tests as arguments; the report compares the first two schemes."""


def tiny_toml(*, seed: int = 3, budgets: tuple[int, ...] = (2, 3), n_trials: int = 12,
              energy_resamples: int = 49, bootstrap_resamples: int = 99, report_extra: str = "",
              schemes: tuple[str, ...] = ("KQV", "QKQV")) -> str:
    """The config's TOML; ``report_extra``: lines appended to its ``[report]`` table."""
    scheme_tables = "\n".join(f'[[schemes]]\nname = "{name}"' for name in schemes)
    return f"""
[sweep]
seed = {seed}
budgets = [{", ".join(map(str, budgets))}]
dims = [16]
n_keys = [32]
n_trials = {n_trials}

{scheme_tables}

[[distributions]]
name = "gaussian"

[report]
comparisons = [["{schemes[0]}", "{schemes[1]}"]]
energy_resamples = {energy_resamples}
bootstrap_resamples = {bootstrap_resamples}
{report_extra}"""
