"""docs/usage.md's Python snippets run as written, in a fresh namespace (no name from
elsewhere injected): the own-scheme script of "Your own scheme or distribution"."""

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _python_block(start: str, end: str) -> str:
    text = (DOCS / "usage.md").read_text()
    return re.search(r"```python\n(.*?)```", text[text.index(start):text.index(end)], re.S).group(1)


def test_the_own_scheme_script_runs_as_written(tmp_path, user_registries):
    code = _python_block("## Your own scheme or distribution", "## Reproduce one trial")
    # the same script, smaller: 20 trials of N = 64 in this process, a report without figures
    edits = {'"n_keys": [512], "n_trials": 300': '"n_keys": [64], "n_trials": 20',
             'out="results/own")': f'out={str(tmp_path / "own")!r}, executor="serial", progress=False)',
             'hypothesis_report(res, "results/own")':
                 f'hypothesis_report(res, {str(tmp_path / "own")!r}, figures=False, bootstrap_resamples=99, '
                 'energy_resamples=19)'}
    for old, new in edits.items():
        assert code.count(old) == 1, old
        code = code.replace(old, new)
    exec(compile(code, "usage.md", "exec"), {"__name__": "__main__"})
    assert "minmax" in (tmp_path / "own" / "report.md").read_text()


def test_the_replay_script_prints_what_its_comment_says(tmp_path, capsys):
    code = _python_block("## Reproduce one trial", "## Parallel and distributed execution")
    code = code.replace('"results/replay_demo"', repr(str(tmp_path / "demo")))
    said = re.search(r"# prints: (.*?)  \(", code).group(1)   # the comment, its note left out
    exec(compile(code, "usage.md", "exec"), {})
    assert capsys.readouterr().out.splitlines() == [said, "True True"]
