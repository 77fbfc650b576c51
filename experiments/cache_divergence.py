"""Where two attention paths of the same quantized cache part ways, and why.

Runs SmolLM2 greedily with ``QuantizedCache(scheme, bits)`` reading attention from the
codes, then the comparison path teacher-forced on those tokens (so every step sees the
same inputs): ``--path copy`` (``keep_decoded=True``: the same loops reading a decoded copy
of the looked-up values — expected bit-identical) or ``--path model`` (``attention="model"``:
the model's own attention over decoded K/V — equal to float32 rounding). Prints the greedy
agreement of a free run of the comparison path, the steps whose argmax differs under
teacher forcing with their top-2 logit gaps on both paths against float32 rounding of the
logit (ε·|logit|), the largest logit difference, and the first generated token whose stored
codes or norms differ, layer by layer. Load average printed.

    OPENBLAS_NUM_THREADS=1 nice -n 10 python experiments/cache_divergence.py --scheme KQV --bits 4 --path model
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import torch


def _run(model, prompt, cache, new: int, forced: list[int] | None = None) -> tuple[list[int], torch.Tensor]:
    logits, tokens = [], []
    with torch.inference_mode():
        out = model(input_ids=prompt, cache=cache, use_cache=True)
        for i in range(new):
            lg = out.logits[0, -1].double()
            logits.append(lg)
            tokens.append(int(lg.argmax()) if forced is None else forced[i])
            if i < new - 1:
                out = model(input_ids=torch.tensor([[tokens[-1]]]), cache=cache, use_cache=True)
    return tokens, torch.stack(logits)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheme", default="KQV", help="a reading scheme (per-vector, exportable)")
    parser.add_argument("--bits", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=512, help="prompt tokens")
    parser.add_argument("--new", type=int, default=128, help="greedy tokens")
    parser.add_argument("--path", choices=["copy", "model"], default="model",
                        help="the path compared with the code path")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    from kvstats.models import QuantizedCache, load_model
    from kvstats.models.texts import prompt_token_ids

    model, tok = load_model()
    prompt = torch.tensor([prompt_token_ids(tok, args.prompt)])
    kw = {"keep_decoded": True} if args.path == "copy" else {"attention": "model"}

    code_cache = QuantizedCache(args.scheme, args.bits)
    code_tokens, code_logits = _run(model, prompt, code_cache, args.new)
    other = QuantizedCache(args.scheme, args.bits, **kw)
    _, forced_logits = _run(model, prompt, other, args.new, forced=code_tokens)
    free_tokens, _ = _run(model, prompt, QuantizedCache(args.scheme, args.bits, **kw), args.new)

    load = os.getloadavg()
    print(f"# {args.scheme}-{args.bits}: codes vs {args.path}; prompt {args.prompt} + {args.new} greedy; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    agree = np.mean(np.array(free_tokens) == np.array(code_tokens))
    first = next((i for i in range(args.new) if free_tokens[i] != code_tokens[i]), None)
    print(f"free greedy agreement {agree:.4f}; first differing token {first}")
    print(f"logits bit-identical at every step: {bool(torch.equal(forced_logits, code_logits))}; "
          f"largest |logit difference| {float((forced_logits - code_logits).abs().max()):.3g}")
    for i in [i for i in range(args.new) if int(forced_logits[i].argmax()) != code_tokens[i]][:3]:
        top = code_logits[i].topk(2)
        a, b = top.indices.tolist()
        print(f"token {i}: top-2 gap {float(top.values[0] - top.values[1]):.3g} on the code path, "
              f"{float(forced_logits[i, a] - forced_logits[i, b]):.3g} on the {args.path} path; "
              f"float32 rounding of the logit {float(top.values[0]) * 2 ** -23:.2g}")
    firsts = []
    for la, lb in zip(code_cache.layers, other.layers):
        for name in la.store:
            a, b = la.store[name].view(), lb.store[name].view()
            differ = (a != b).reshape(*a.shape[:3], -1).any(-1).any(0).any(0)
            pos = torch.nonzero(differ).flatten()
            if len(pos):
                firsts.append((int(pos[0]) - args.prompt, la.layer_idx, name, len(pos)))
    if not firsts:
        print("stored codes and norms identical in every layer")
    for token, layer, name, count in sorted(firsts)[:8]:
        print(f"first difference at generated token {token}: layer {layer} {name} ({count} tokens differ there)")


if __name__ == "__main__":
    main()
