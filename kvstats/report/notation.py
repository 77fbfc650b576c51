"""How the report writes a number, a p-value, a level, an interval and a case's name.

The cell and label formats shared by :mod:`kvstats.report.wording` (the sentences),
:mod:`kvstats.report.tables` (the formatted tables), :mod:`kvstats.report.sections` (the
document) and :mod:`kvstats.report.render` (the figures' file names, :func:`figure_names`),
so that one number reads the same everywhere in a report.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from typing import Any, Iterable, Mapping

import numpy as np

from kvstats.analysis.frame import short_params


def _num(x: float | int | bool | None, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    if math.isinf(x):
        return "+inf" if x > 0 else "−inf"
    if x == 0:
        return "0"
    if abs(x) >= 1e4 or abs(x) < 1e-3:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


def _p(x: float, alpha: float | None = None) -> str:
    """An (adjusted) p-value: 3 decimals, or 3 significant digits in e-notation below 1e-3.

    With ``alpha``, more digits where the rounded value would fall on the other side of α
    than the p-value itself, so that a row's printed p and its verdict never disagree
    (0.0504 is not "0.050" beside "no significant difference" at α = 0.05).

    Examples
    --------
    >>> _p(0.0504), _p(0.0504, alpha=0.05), _p(0.04996, alpha=0.05), _p(2.5e-7)
    ('0.050', '0.0504', '0.050', '2.50e-07')
    """
    if x < 1e-300:
        return "<1e-300"
    sci = x < 1e-3
    digits = 2 if sci else 3
    text = f"{x:.{digits}e}" if sci else f"{x:.{digits}f}"
    while alpha is not None and (float(text) <= alpha) != (x <= alpha) and digits < 17:
        digits += 1
        text = f"{x:.{digits}e}" if sci else f"{x:.{digits}f}"
    return text


def _apart(a: float, b: float, digits: int = 4) -> int:
    """The fewest significant digits (at least ``digits``) at which :func:`_num` writes two
    different numbers differently: an interval's end beside a margin it does not equal.

    Examples
    --------
    >>> _apart(0.98036, 0.98039), _num(0.98036, _apart(0.98036, 0.98039))
    (5, '0.98036')
    """
    while a != b and _num(a, digits) == _num(b, digits) and digits < 17:
        digits += 1
    return digits


def _unit_counts(summary: Any) -> Any:
    """Each summary row's count of units, what its mean and interval are over: ``n_clusters``
    on cluster means (whose ``n_trials`` counts the trials), else ``n_trials``; an empty
    Series without either."""
    import pandas as pd

    for col in ("n_clusters", "n_trials"):
        if col in summary:
            return summary[col]
    return pd.Series(dtype=int)


def _cluster_spans(trials: pd.DataFrame, trial_means: bool = False) -> str:
    """How the cells' trials come in clusters, said per kind of case: real cases' texts,
    other shared clusters, and cases whose every trial is its own cluster (synthetic
    trials, aggregate_clusters' rule for a NaN cluster); each kind named only in a report
    holding more than one, the last as "the other real (synthetic) cases" where cases of the
    same distribution kind also share clusters. ``trial_means``: the means are of trials
    (unit = "trial"), so a clustered kind is said as its trials per mean and their texts.

    Examples
    --------
    >>> import pandas as pd
    >>> f = pd.DataFrame({"distribution": ["real"] * 4 + ["gaussian"] * 2, "params": "-",
    ...     "dim": 16, "n_keys": 32, "budget": 3.0, "scheme": "KV",
    ...     "trial": [0, 1, 2, 3, 0, 1], "cluster": [0, 0, 1, 1, None, None]})
    >>> _cluster_spans(f)
    'real cases: 2 texts per mean, 2 trials per text; synthetic cases: 2 trials per mean, each its own cluster'
    >>> _cluster_spans(f, trial_means=True)[:46]
    'real cases: 4 trials per mean from 2 texts (2 '
    """
    from kvstats.analysis.frame import CASE_COLUMNS
    from kvstats.results import REAL

    t = trials.assign(cluster=trials["cluster"].fillna(trials["trial"]))
    keys = [*CASE_COLUMNS, "budget", "scheme"]
    cells = t.groupby(keys, sort=False)
    k, n = cells["cluster"].nunique(), cells.size()
    per = t.groupby([*keys, "cluster"], sort=False, dropna=False).size().droplevel("cluster")
    real = cells["distribution"].first() == REAL
    span = lambda v: f"{int(v.min())}" + ("" if v.min() == v.max() else f"–{int(v.max())}")
    own = real[k == n]   # cells whose every trial is its own cluster: named by their kind,
    # "the other …" where the same kind also has shared clusters (never one name for two kinds)
    other = "the other " if ((k < n) & (real if own.all() else ~real)).any() else ""
    kinds = [("real cases", (k < n) & real, "text"), ("clustered synthetic cases", (k < n) & ~real,
             "cluster"), (other + "real cases" if own.all() else other + "synthetic cases"
                          if not own.any() else "the other cases", k == n, None)]
    parts = []
    for name, sel, one in kinds:
        if not sel.any():
            continue
        cut = sel[sel].index
        parts.append((name, (f"{span(n[cut])} trials per mean from {span(k[cut])} {one}s ({span(per.loc[cut])} "
                             f"per {one})" if trial_means else f"{span(k[cut])} {one}s per mean, "
                             f"{span(per.loc[cut])} trials per {one}")
                      if one else f"{span(n[cut])} trials per mean, each its own cluster"))
    return "; ".join(text if len(parts) == 1 else f"{name}: {text}" for name, text in parts)


def _pct(level: float) -> str:
    """A confidence level as a percentage, never truncated (0.975 → "97.5%", not "97%")."""
    return f"{100 * float(level):.10g}%"


def _ci(mean: float, low: float, high: float) -> str:
    if mean == low == high:
        return _num(mean)
    return f"{_num(mean)} [{_num(low)}, {_num(high)}]"


def _case_title(case: dict[str, Any], digits: int | None = None) -> str:
    """The case as a title; ``digits``: its params' numbers to that many significant digits
    (:func:`kvstats.analysis.frame.short_params`; None: exact, as the slugs of file names use)."""
    text = case["params"] if digits is None else short_params(case["params"], digits)
    params = "" if case["params"] in ("-", "") else f" ({text})"
    return f"{case['distribution']}{params}, d = {case['dim']}, N = {case['n_keys']}"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()


def _case_key(case: Mapping[str, Any]) -> tuple[str, str, int, int]:
    """A case's exact key (distribution, params, dim, n_keys), as plain Python values."""
    return (str(case["distribution"]), str(case["params"]), int(case["dim"]), int(case["n_keys"]))


def _dependent_cases(dependent: Any, rows: pd.DataFrame) -> tuple[frozenset, bool]:
    """The keys (:func:`_case_key`) of the cases whose tests took trials that share clusters
    as units (unit = "trial" by request), and whether these are all of ``rows``' cases.
    ``dependent``: True (every case), False (none) or a collection of case keys.

    Examples
    --------
    >>> import pandas as pd
    >>> rows = pd.DataFrame({"distribution": ["real", "gaussian"], "params": "-", "dim": 16,
    ...                      "n_keys": 32})
    >>> _dependent_cases({("real", "-", 16, 32)}, rows)
    (frozenset({('real', '-', 16, 32)}), False)
    >>> _dependent_cases(True, rows)[1], _dependent_cases(False, rows)
    (True, (frozenset(), False))
    """
    from kvstats.analysis.frame import CASE_COLUMNS

    if not dependent:   # False or no case: ``rows`` not read
        return frozenset(), False
    every = frozenset(map(_case_key, rows[list(CASE_COLUMNS)].drop_duplicates().to_dict("records")))
    keys = every if isinstance(dependent, (bool, np.bool_)) else frozenset(map(tuple, dependent))
    return keys, every <= keys


def figure_names(cases: Iterable[Mapping[str, Any]],
                 pairs: Iterable[tuple[str, str]]) -> dict[tuple, str]:
    """Each per-case and per-pair figure's file name (without suffix), chosen once and unique.

    A name is the readable slug of the case's title or of the pair's labels; a slug lowercases
    and turns every run of other characters into "_", so cases or pairs can share one (a
    distribution's params ``tag='a-b'`` and ``tag='a+b'``; the labels "K+V" and "K-V"). Those that do
    get a short stable hash of their exact key appended, longer until every name differs;
    the others keep the plain slug. :func:`kvstats.hypothesis_report` draws the figures and
    :func:`kvstats.report.sections.build_document` links them by this one map.

    Parameters
    ----------
    cases : iterable of mapping
        Each case's ``distribution``, ``params``, ``dim`` and ``n_keys``.
    pairs : iterable of (str, str)
        The compared scheme labels, as given.

    Returns
    -------
    dict
        ``("shannon_phi", place, case_key)`` → name for each place "k", "v", "t", where
        ``case_key`` is (distribution, params, dim, n_keys) as str, str, int, int; and
        ``("crossover", a, b)`` → name.

    Examples
    --------
    >>> from kvstats.report.notation import figure_names
    >>> case = {"distribution": "gaussian", "params": "-", "dim": 32, "n_keys": 64}
    >>> names = figure_names([case], [("KQV", "KV")])
    >>> names[("shannon_phi", "k", ("gaussian", "-", 32, 64))], names[("crossover", "KQV", "KV")]
    ('shannon_phi_k_gaussian_d_32_n_64', 'crossover_kqv_vs_kv')
    >>> names = figure_names([], [("K+V", "KV"), ("K-V", "KV")])
    >>> sorted(names.values())
    ['crossover_k_v_vs_kv_7d3781', 'crossover_k_v_vs_kv_eee2da']
    """
    keys = list(dict.fromkeys(_case_key(c) for c in cases))
    slugs: dict[tuple, str] = {("case", *k): _slug(_case_title(dict(zip(
        ("distribution", "params", "dim", "n_keys"), k)))) for k in keys}
    slugs.update({("pair", str(a), str(b)): f"{_slug(str(a))}_vs_{_slug(str(b))}" for a, b in pairs})
    stems = _unique(slugs)
    out: dict[tuple, str] = {("shannon_phi", place, k): f"shannon_phi_{place}_{stems[('case', *k)]}"
                             for k in keys for place in ("k", "v", "t")}
    out.update({("crossover", k[1], k[2]): f"crossover_{stem}" for k, stem in stems.items()
                if k[0] == "pair"})
    return out


def _unique(slugs: Mapping[tuple, str]) -> dict[tuple, str]:
    """``slugs`` with a hash of the key appended to each slug that several keys of one kind
    (``key[0]``: the kinds' names get different prefixes) share; a longer hash where a short
    one still leaves two names alike."""
    shared = Counter((k[0], s) for k, s in slugs.items())
    for width in (6, 10, 16, 40):
        names = {k: s if shared[k[0], s] == 1 else
                 f"{s}_{hashlib.sha1(repr(k[1:]).encode()).hexdigest()[:width]}"
                 for k, s in slugs.items()}
        if len({(k[0], n) for k, n in names.items()}) == len(names):
            return names
    raise ValueError(f"figure names must be unique; two keys share {sorted(names.values())}")
