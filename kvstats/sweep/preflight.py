"""The sweep's check before any compute: every cell of the grid can run, and user code does
what the sweep trusts it for.

Every distribution is drawn at every (d, N) and every scheme built at every budget and d
on one tiny draw, so a bad parameter fails at once with a message naming the grid's
entry, not after hours of other cells. User code is held to more, as the sweep records
what it claims: a scheme of one's own must store the bits it declares (the contract's
clauses, :mod:`kvstats.quant.contract_bits`), code alike under one seed and one input
alike twice in one build, decode a tiny draw to finite vectors of its shape, code each trial
and (per-vector) each token on its own, and change its codes with the seed exactly when
it declares ``randomized`` (the contract's clauses of those names, on small inputs); a
distribution of one's own must give the same keys under one seed and other keys to each
trial (the trial is the tests' independent unit). :func:`kvstats.sweep.check_grid` and
:func:`kvstats.sweep.run_sweep` call :func:`preflight`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kvstats.results import REAL
from kvstats.sweep.work import _naming

if TYPE_CHECKING:
    from kvstats.sweep.config import SweepConfig
    from kvstats.sweep.plan import Cell

__all__ = ["preflight"]


def preflight(config: SweepConfig, cells: list[tuple[Cell, str]]) -> None:
    """Build every distribution at every (d, N) and every scheme at every budget and d
    once, on one tiny draw; hold user code to what the sweep trusts it for
    (:func:`_check_user_schemes`; a user distribution drawn twice must give the same keys,
    and two trials of one draw other keys). Raises the first failure, naming its entry.

    Examples
    --------
    >>> from kvstats.sweep import SweepConfig
    >>> from kvstats.sweep.preflight import preflight
    >>> cfg = SweepConfig.from_dict({"schemes": ["KQV"], "budgets": [3], "dims": [16], "n_keys": [8],
    ...                              "distributions": [{"name": "low_rank", "params": {"rank": 40}}]})
    >>> preflight(cfg, [(c, cfg.cell_id(c)) for c in cfg.cells()])
    Traceback (most recent call last):
    ...
    ValueError: distribution 'low_rank' params rank=40 at d=16, N=8: rank must be ...
    """
    from kvstats.data.register import _USER
    from kvstats.data.synthetic import sample
    from kvstats.quant.schemes import make_scheme

    seen_cases, built = set(), {}
    for cell, _ in cells:
        case = (cell.case_key(),)
        if cell.distribution != REAL and case not in seen_cases:
            seen_cases.add(case)
            where = (f"distribution {cell.distribution!r} params {cell.params_label()} "
                     f"at d={cell.dim}, N={cell.n_keys}")
            # a user sampler is drawn twice, two trials each: it must draw from its rng (each trial
            # anew: sample() itself refuses one draw repeated over the trials)
            user = cell.distribution in _USER
            draws = [_entry(where, lambda: sample(
                cell.distribution, 1 + user, cell.n_keys, cell.dim, seed=0, n_queries=config.n_queries,
                dtype=np.dtype(config.dtype), generator=getattr(config, "generator", 1), **cell.params))
                for _ in range(1 + user)]
            if not all(np.array_equal(getattr(draws[0], x), getattr(d, x), equal_nan=True)
                       for d in draws[1:] for x in "KVq"):
                raise ValueError(f"{where}: the same seed gives other keys (two draws with seed 0 "
                                 "differ): its sampler must draw from the rng it is given, not "
                                 "np.random or a generator of its own")
        spec = cell.scheme
        key = (spec.display(), cell.budget, cell.dim)
        if key not in built:
            built[key] = _entry(f"scheme {cell.scheme_at()}, d={cell.dim}", lambda: make_scheme(
                spec.name, cell.budget, cell.dim, seed=0, draws=1, **spec.params))
    _check_user_schemes(config, cells, built)


def _entry(where: str, make: Any) -> Any:
    """``make()``; its failure names the grid's entry ``where`` (user code may raise anything);
    out of memory, the sizes are the config's to change (a sweep holds one trial at least)."""
    try:
        return make()
    except MemoryError as exc:
        raise ValueError(f"{where}: one trial does not fit in memory ({exc}); lower dims, n_keys or "
                         "n_queries") from None
    except Exception as exc:
        raise _naming(exc, f"[{where}]", f"{where}: {exc}") from None


# what to change when a clause fails: a sweep relies on each of these declarations
_DECLARED = {
    "independent_trials": "its trials in a sweep would not be independent and their numbers would "
                          "depend on chunk_size; a scheme of your own cannot declare couples_trials: "
                          "compute each statistic within one trial (the last two axes)",
    "independent_tokens": "a sweep would measure another scheme than a cache runs: declare "
                          "define_scheme's token_group_param, or code each token on its own",
    "seeds": "a cache gives every head one draw where randomized=False: declare define_scheme's "
             "randomized as the coders behave",
}


def _check_user_schemes(config: SweepConfig, cells: list[tuple[Cell, str]], built: dict) -> None:
    """Refuse a user scheme (built-ins: the test suite holds them) whose stored bits are
    not what it declares (the sweep records them), by the contract's clauses
    (:mod:`kvstats.quant.contract_bits`: its smallest d, every N and budget of its range;
    the codes' bytes at their small sizes; its code failing there, outside the grid, is
    left to the sweep); whose same seed gives other codes (``built``'s seed-0 build of
    each (scheme, budget, d) and one more, on one tiny draw) or whose one build codes that
    draw twice differently (per-call randomness, named as such before any clause could
    blame coupling: the contract asks one coding per input and build); or whose trials or tokens
    depend on each other, or whose other seed changes the codes where it declares
    ``randomized=False`` or not where True (the contract's ``independent_trials``,
    ``independent_tokens`` and ``seeds`` clauses at its smallest d: five builds and ten
    codings of at most 120 vectors each per user scheme). The message names the
    declaration to fix."""
    from kvstats.quant.contract import check_independent_tokens, check_independent_trials, check_seeds
    from kvstats.quant.contract_bits import _PER_CALL, check_expected_bits, check_stored_bytes
    from kvstats.quant.contract_harness import SchemeContractError
    from kvstats.quant.registry import BUILTIN, scheme_def
    from kvstats.quant.schemes import make_scheme

    def run(clause: Any, then: str) -> None:
        try:
            clause()
        except SchemeContractError as exc:   # per-call randomness: its message says what to do
            then = "" if _PER_CALL in str(exc) else f"; {then}"
            raise SchemeContractError(f"{exc}{then} (kvstats.check_scheme({spec.name!r}) runs the "
                                      "whole contract)") from None
        except Exception:   # noqa: BLE001, S110 - at a size the grid lacks (see above)
            pass

    specs: dict[str, list[Cell]] = {}
    for cell in (c for c, _ in cells if scheme_def(c.scheme.name).name not in BUILTIN):
        specs.setdefault(cell.scheme.display(), []).append(cell)
    for group in specs.values():
        spec, dim, sizes = group[0].scheme, min(c.dim for c in group), sorted({c.n_keys for c in group})
        bits_then = "a sweep would record the declared bits for codes storing others"
        run(lambda: check_expected_bits(spec.name, spec.params, dims=(dim,), n_tokens=sizes,
                                        nominal=False, odd_dims=()), bits_then)
        run(lambda: check_stored_bytes(spec.name, spec.params, exact=False), bits_then)
        for cell in {(c.budget, c.dim): c for c in sorted(group, key=lambda c: -c.n_keys)}.values():
            K, V = np.random.default_rng(0).standard_normal((2, 1, cell.n_keys, cell.dim)).astype(config.dtype)
            try:   # each (budget, d) at its smallest N; a failure of its code is the sweep's to name
                again = make_scheme(spec.name, cell.budget, cell.dim, seed=0, draws=1, **spec.params)
                first = built[(spec.display(), cell.budget, cell.dim)]
                coded = [s.roundtrip(K, V) for s in (first, again, again)]   # again twice: per call?
            except Exception:   # noqa: BLE001, S112
                continue
            for side, x, x_hat in zip(("keys", "values"), (K, V), coded[0]):
                bad = (f"shape {np.shape(x_hat)}" if np.shape(x_hat) != x.shape else
                       f"{np.size(x_hat) - np.isfinite(x_hat).sum()} non-finite values"
                       if not np.isfinite(x_hat).all() else None)
                if bad:   # the sweep would stop on it mid-compute, after clearing the folder
                    raise ValueError(f"scheme {cell.scheme_at()}, d={cell.dim}: its roundtrip of {x.shape} "
                                     f"finite {side} returns {bad}; a scheme's decode must return finite "
                                     "vectors of the input's shape")
            if not all(np.array_equal(a, b) for a, b in zip(*coded[:2])):
                raise ValueError(f"scheme {cell.scheme_at()}, d={cell.dim}: the same seed gives other "
                                 "codes (two builds with seed 0 code one draw differently): draw its "
                                 "randomness from the key_rng/value_rng its build gets, not np.random "
                                 "or a generator of its own")
            if not all(np.array_equal(a, b) for a, b in zip(*coded[1:])):   # before blaming coupling
                raise SchemeContractError(f"scheme {cell.scheme_at()}, d={cell.dim}: one build codes "
                                          f"one draw twice differently: {_PER_CALL} (kvstats.check_scheme("
                                          f"{spec.name!r}) runs the whole contract)")
        for clause, check in (("independent_trials", check_independent_trials),
                              ("independent_tokens", check_independent_tokens), ("seeds", check_seeds)):
            run(lambda: check(spec.name, spec.params, dim=dim), _DECLARED[clause])
