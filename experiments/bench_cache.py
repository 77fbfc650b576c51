"""Decode speed and memory of the quantized transformers caches on SmolLM2, side by side.

One run measures, on the same prompt and the same greedy loop:

- ``DynamicCache`` (float32, the baseline of every ratio);
- for each ``--scheme`` (default KQV and turboquant_mse, at ``--bits``),
  ``kvstats.models.QuantizedCache`` reading attention from the codes (the default), the
  same with its decoded copy of the looked-up values read by the same loops
  (``keep_decoded=True``: same numbers, the look-up's cost apart) and, with ``--model-attn``,
  with the model's own attention over decoded K/V (``attention="model"``); for ``kivi`` and
  ``qjl`` (token-grouped codes, :mod:`kvstats.models.group_codes`) the second row is
  always the model's attention over the decoded copy;
- transformers' own ``QuantizedCache`` with the quanto int4 backend (if
  ``optimum-quanto`` is installed; its defaults: groups of 64, 128-token fp residual).

For each: prefill seconds, decode tokens/s (the ``--new`` greedy steps after the prefill;
the minimum time over ``--repeats`` runs, after one untimed short run of every
configuration; the configurations take turns at every decode
step — A B C, C B A, … with all caches alive at once — so a change of load on a shared
machine reaches all of them within one token's time; ``--interleave run`` takes turns per
whole run instead), its ratio to DynamicCache and to quanto int4 by wall time and by the
process's CPU time — computed within each run (the two decode times of one lockstep run,
which shared its load) and printed as the median [min, max] over the runs (a ratio of
minima would pair times from different runs) — the bytes the cache holds per
cached token (every tensor it references, views counted by their whole storage) against
the stored code bytes per *coded* token (kivi/qjl hold their newest, open group uncoded:
those tokens, per layer, are printed beside it), and the quality of its next-token
predictions against DynamicCache's and the scheme's code path's. Prints the load average
before and after.

Quality is measured teacher-forced: after the timing, every configuration is fed the
same continuation (DynamicCache's greedy tokens) one token at a time, as in generation,
and each step's next-token distribution is compared with DynamicCache's on the same
inputs: top-1 agreement and mean KL(p_DynamicCache || p) in nats per token, plus top-1
agreement with the scheme's code path. These do not diverge: a token chosen differently
does not change what later steps see. The greedy columns give only how many leading
tokens two free greedy runs share (the prefix before their first different token): the
fraction of equal tokens of two greedy runs, shown before, moved from 0.031 to 0.172
between two revisions, since sequences that part at one token rarely meet again.
``--profile NAME`` runs one more decode of the configuration whose name contains NAME
under cProfile and prints its top functions.

    OPENBLAS_NUM_THREADS=1 nice -n 10 python experiments/bench_cache.py [--prompt 512] [--new 128]
        [--scheme KQV turboquant_mse] [--bits 4] [--repeats 3] [--threads 1] [--model-attn]
        [--interleave step|run] [--profile codes]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from datetime import date

import numpy as np
import torch


def greedy(model, prompt: torch.Tensor, cache, new: int) -> tuple[list[int], float, float, float]:
    """Prefill, then ``new`` greedy steps; returns (tokens, prefill s, decode wall s, decode CPU s)."""
    with torch.inference_mode():
        t0 = time.perf_counter()
        out = model(input_ids=prompt, cache=cache, use_cache=True)
        tok = out.logits[:, -1].argmax(-1, keepdim=True)
        t1, c1 = time.perf_counter(), time.process_time()
        tokens = [int(tok)]
        for _ in range(new - 1):
            out = model(input_ids=tok, cache=cache, use_cache=True)
            tok = out.logits[:, -1].argmax(-1, keepdim=True)
            tokens.append(int(tok))
        t2, c2 = time.perf_counter(), time.process_time()
    return tokens, t1 - t0, t2 - t1, c2 - c1


def teacher_forced(model, prompt: torch.Tensor, makers: dict, tokens: list[int],
                   base_name: str) -> dict[str, tuple[np.ndarray, float]]:
    """Every configuration fed the prompt, then ``tokens`` one at a time (teacher forcing).

    Returns {name: (its top-1 token at each of the ``len(tokens)`` steps, mean
    KL(p_base || p) in nats over those steps)}, ``base_name``'s distributions the reference."""
    from kvstats.models.quality import _log_probs  # kl_quality's teacher-forced decode pass

    n = prompt.shape[1]
    ids = prompt[0].tolist() + list(tokens)
    forced = lambda make: _log_probs(model, ids, make(), "decode", n)[n - 1:-1]  # noqa: E731
    ref = forced(makers[base_name])
    p_ref = ref.exp()
    out = {}
    for name, make in makers.items():
        lp = ref if name == base_name else forced(make)
        kl = (p_ref * (ref - lp)).sum(-1).clamp_min(0.0)  # clamp: float rounding only
        out[name] = (lp.argmax(-1).numpy(), float(kl.mean()))
    return out


def equal_prefix(a, b) -> int:
    """How many leading tokens the sequences ``a`` and ``b`` (of one length) share."""
    differ = np.flatnonzero(np.asarray(a) != np.asarray(b))
    return int(differ[0]) if differ.size else len(a)


def run_ratios(base, config) -> np.ndarray:
    """Per-run speed ratios ``base[r] / config[r]``: the two decode times of one run ``r``
    (one lockstep run shares its load), not the ratio of their minima, which may come
    from different runs.

    Examples
    --------
    >>> import numpy as np
    >>> run_ratios([10.0, 14.0, 9.0], [11.0, 14.0, 10.0]).round(3).tolist()
    [0.909, 1.0, 0.9]
    """
    base, config = np.asarray(base, dtype=float), np.asarray(config, dtype=float)
    if base.shape != config.shape or base.ndim != 1 or base.size == 0:
        raise ValueError(f"base and config must be 1-D times of the same runs; received shapes "
                         f"{base.shape} and {config.shape}")
    if np.any(config <= 0) or np.any(base <= 0):
        raise ValueError(f"decode times must be > 0; received base {base.tolist()}, config {config.tolist()}")
    return base / config


def spread(ratios) -> str:
    """``"median [min, max]"`` of per-run ratios (two decimals; one run: its value alone).

    Examples
    --------
    >>> spread([0.88, 0.93, 0.90]), spread([1.05])
    ('0.90 [0.88, 0.93]', '1.05')
    """
    r = np.asarray(ratios, dtype=float)
    if r.ndim != 1 or r.size == 0:
        raise ValueError(f"ratios must be a non-empty 1-D sequence; received shape {r.shape}")
    if r.size == 1:
        return f"{r[0]:.2f}"
    return f"{np.median(r):.2f} [{r.min():.2f}, {r.max():.2f}]"


def code_bytes_per_coded_token(code_bytes: float, n_coded) -> float:
    """Code bytes (summed over the layers) per coded token: ``code_bytes`` over the layers'
    mean ``n_coded`` (NaN before a first group is coded). Tokens held uncoded (kivi's and
    qjl's open group, a window) cost no code bytes, so dividing by every cached token
    understated the codes' cost per token.

    Examples
    --------
    >>> code_bytes_per_coded_token(7200 * 32, [32, 32]), code_bytes_per_coded_token(0, [0, 0])
    (7200.0, nan)
    """
    coded = float(np.mean(n_coded))
    if coded < 0 or code_bytes < 0:
        raise ValueError(f"code_bytes and n_coded must be >= 0; received {code_bytes}, {list(n_coded)}")
    return code_bytes / coded if coded > 0 else float("nan")


def lockstep(model, prompt: torch.Tensor, makers: dict, new: int) -> dict[str, list]:
    """Every configuration's prefill, then their decode steps in turns, token by token
    (A B C, C B A, …), so a change of load on a shared machine reaches all of them within
    one token's time. Returns {name: [tokens, prefill s, decode wall s, cache, decode CPU s]}."""
    caches = {name: make() for name, make in makers.items()}
    res: dict[str, list] = {}
    last: dict[str, torch.Tensor] = {}
    with torch.inference_mode():
        for name, cache in caches.items():
            t0 = time.perf_counter()
            out = model(input_ids=prompt, cache=cache, use_cache=True)
            last[name] = out.logits[:, -1].argmax(-1, keepdim=True)
            res[name] = [[int(last[name])], time.perf_counter() - t0, 0.0, cache, 0.0]
        order = list(caches)
        for step in range(new - 1):
            for name in (order if step % 2 == 0 else order[::-1]):
                t0, c0 = time.perf_counter(), time.process_time()
                out = model(input_ids=last[name], cache=caches[name], use_cache=True)
                last[name] = out.logits[:, -1].argmax(-1, keepdim=True)
                res[name][2] += time.perf_counter() - t0
                res[name][4] += time.process_time() - c0
                res[name][0].append(int(last[name]))
    return res


def timed_runs(model, prompt: torch.Tensor, makers: dict, new: int, repeats: int,
               interleave: str = "step") -> dict[str, list]:
    """Each configuration's greedy run, timed ``repeats`` times (per decode step in turns,
    :func:`lockstep`, or per whole run), after one untimed warm-up of every configuration
    (a prefill of the prompt's first 40 tokens, a whole kivi/qjl group, and 2 decode
    steps: imports, the compiled look-up loops, tables built on first use). Returns
    {name: [tokens, prefill s, decode wall s, cache, decode CPU s, decode wall s of each
    run, decode CPU s of each run]}: the first three times each the minimum over the runs,
    the last two lists in run order (index r: run r of every configuration, for
    :func:`run_ratios`)."""
    lockstep(model, prompt[:, :40], makers, 3)  # warm-up, untimed
    best: dict[str, list] = {}
    for rep in range(repeats):
        if interleave == "step":
            runs = lockstep(model, prompt, makers, new)
        else:
            runs = {}
            for name, make in makers.items():
                cache = make()
                tokens, pre, dec, cpu = greedy(model, prompt, cache, new)
                runs[name] = [tokens, pre, dec, cache, cpu]
        for name, run in runs.items():
            if name not in best:
                best[name] = run[:5] + [[run[2]], [run[4]]]
            else:  # minimum over runs, wall and CPU separately
                best[name][1] = min(best[name][1], run[1])
                best[name][2] = min(best[name][2], run[2])
                best[name][4] = min(best[name][4], run[4])
                best[name][5].append(run[2])
                best[name][6].append(run[4])
    return best


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", type=int, default=512, help="prompt tokens")
    parser.add_argument("--new", type=int, default=128, help="greedy tokens generated")
    parser.add_argument("--scheme", nargs="+", default=["KQV", "turboquant_mse"],
                        help="kvstats schemes of the QuantizedCache rows")
    parser.add_argument("--bits", type=int, default=4, help="their budget per coordinate")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs per configuration (decode tok/s: the fastest; ratios: median [min, max] "
                             "of the per-run ratios)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--model-attn", action="store_true",
                        help="add rows with attention='model' (the model's attention over a decoded copy)")
    parser.add_argument("--no-quanto", action="store_true", help="leave transformers' quanto int4 cache out")
    parser.add_argument("--interleave", choices=["step", "run"], default="step",
                        help="take turns per decode step (default; all caches alive at once) or per "
                             "whole run (one cache at a time)")
    parser.add_argument("--profile", default=None, metavar="NAME",
                        help="cProfile one more decode of the configuration whose name contains NAME")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    load0 = os.getloadavg()

    from transformers import DynamicCache

    from kvstats.models import QuantizedCache, load_model
    from kvstats.models.peers import held_bytes
    from kvstats.models.texts import prompt_token_ids

    model, tok = load_model()
    prompt = torch.tensor([prompt_token_ids(tok, args.prompt)])

    base_name = "DynamicCache (float32)"
    configs = {base_name: lambda: DynamicCache(config=model.config)}
    code_row: dict[str, str] = {}  # row -> the code-path row of its scheme
    for scheme in args.scheme:
        label = f"QuantizedCache {scheme}-{args.bits}"
        if scheme in ("kivi", "qjl"):  # no looked-up values to copy: the decoded copy is the model path's
            rows = {f"{label}, codes": {}, f"{label}, model attention over decoded K/V": {"attention": "model"}}
        else:
            rows = {f"{label}, codes": {}, f"{label}, decoded copy": {"keep_decoded": True}}
        if args.model_attn and scheme not in ("kivi", "qjl"):
            rows[f"{label}, model attention over decoded K/V"] = {"attention": "model"}
        for name, kw in rows.items():
            configs[name] = (lambda s=scheme, kw=kw: QuantizedCache(s, args.bits, **kw))
            code_row[name] = f"{label}, codes"
    quanto_name, quanto_note = "transformers QuantizedCache quanto int4", ""
    if not args.no_quanto:
        try:
            import optimum.quanto  # noqa: F401
            from transformers import QuantizedCache as HFQuantizedCache

            configs[quanto_name] = lambda: HFQuantizedCache("quanto", config=model.config, nbits=4)
        except ImportError as exc:
            quanto_note = f"quanto not measured: {exc}"

    best = timed_runs(model, prompt, configs, args.new, args.repeats, args.interleave)
    names = list(configs)
    base_tokens, _, _, base_cache, _, base_dec, base_cpu = best[base_name]
    q_dec, q_cpu = (best[quanto_name][5], best[quanto_name][6]) if quanto_name in best else (None, None)
    n_cached = args.prompt + args.new - 1
    fp32 = held_bytes(base_cache.layers) / n_cached
    quality = teacher_forced(model, prompt, configs, base_tokens, base_name)
    load = os.getloadavg()
    print(f"# {date.today()}  {platform.machine()}  torch {torch.__version__}  threads {args.threads}  "
          f"load average before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
          f"after {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs)")
    turns = "per decode step (A B C, C B A, …)" if args.interleave == "step" else "per run"
    print(f"# prompt {args.prompt} tokens + {args.new} greedy; decode time summed over the steps, "
          f"configurations taking turns {turns}; decode tok/s the fastest of {args.repeats} runs, each ratio "
          f"the median [min, max] of the per-run ratios (same run's times); stored code bytes per coded "
          f"token (uncoded: tokens per layer held in full precision, no codes); quality teacher-forced on "
          f"DynamicCache's {args.new} greedy tokens (top-1 agreement, mean KL in nats per token)")
    from kvstats.models.lut_kernel import kernel

    print(f"# code-reading look-up loops: {'compiled C' if kernel() is not None else 'torch gathers (no C compiler)'}")
    print("| cache | prefill s | decode tok/s (wall) | × DynamicCache (wall) | × DynamicCache (CPU) "
          "| × quanto int4 (wall) | × quanto int4 (CPU) | held bytes/token | stored code bytes/token "
          "| held / stored | top-1 = DynamicCache | KL vs DynamicCache | top-1 = code path "
          "| greedy prefix = DynamicCache | greedy prefix = code path |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in names:
        tokens, pre, dec, cache, cpu, decs, cpus = best[name]
        held = held_bytes(cache.layers) / n_cached
        uncoded = ""
        if isinstance(cache, QuantizedCache):
            rep = cache.memory_report()
            stored = code_bytes_per_coded_token(rep["code_bytes"], [lay.n_coded for lay in cache.layers])
            if rep["uncoded_tokens"]:  # kivi/qjl's open group: held in full precision, no codes
                uncoded = f" ({rep['uncoded_tokens'] / len(cache.layers):.0f} uncoded)"
            if abs(rep["held_bytes"] + rep["fixed_bytes"] - held * n_cached) > 0.001 * held * n_cached:
                print(f"  (memory_report {rep['held_bytes'] + rep['fixed_bytes']} vs walked {held * n_cached})")
            fixed = rep["fixed_bytes"]
            held = rep["held_bytes"] / n_cached
            note = f" (+{fixed / 1e3:.0f} KB fixed)"
        else:
            stored, note = (fp32, "") if name == base_name else (float("nan"), "")
        top1, kl = quality[name]
        ref = code_row.get(name)
        own = ref is None or ref == name
        top1_code = "—" if own else f"{np.mean(top1 == quality[ref][0]):.3f}"
        prefix_code = "—" if own else equal_prefix(tokens, best[ref][0])
        known = stored == stored  # NaN: the cache's code bytes are not separable (quanto)
        stored_txt = (f"{stored:,.0f}" if known else "—") + uncoded
        # no ratio before a first whole group is coded (qjl/kivi prompts under 32 tokens)
        ratio_txt = f"{held / stored:.3f}" if known and stored > 0 else "—"
        vs_q = (f"{spread(run_ratios(q_dec, decs))} | {spread(run_ratios(q_cpu, cpus))}") if q_dec else "— | —"
        print(f"| {name} | {pre:.2f} | {(args.new - 1) / dec:.1f} | {spread(run_ratios(base_dec, decs))} | "
              f"{spread(run_ratios(base_cpu, cpus))} | "
              f"{vs_q} | {held:,.0f}{note} | {stored_txt} | {ratio_txt} | {np.mean(top1 == base_tokens):.3f} | "
              f"{kl:.4f} | {top1_code} | {equal_prefix(tokens, base_tokens)} | {prefix_code} |")
    if quanto_note:
        print(quanto_note)
    if args.profile:
        _profile(model, prompt, configs, args.profile, args.new)


def _profile(model, prompt, configs, needle: str, new: int) -> None:
    """cProfile the decode steps of the first configuration whose name contains ``needle``."""
    import cProfile
    import pstats

    name = next((n for n in configs if needle in n), None)
    if name is None:
        raise ValueError(f"--profile must name one of {list(configs)}; received {needle!r}")
    cache = configs[name]()
    with torch.inference_mode():
        out = model(input_ids=prompt, cache=cache, use_cache=True)
        tok = out.logits[:, -1].argmax(-1, keepdim=True)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(new - 1):
            out = model(input_ids=tok, cache=cache, use_cache=True)
            tok = out.logits[:, -1].argmax(-1, keepdim=True)
        prof.disable()
    print(f"\n# cProfile of {new - 1} decode steps: {name}")
    pstats.Stats(prof).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
