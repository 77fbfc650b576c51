"""Capture the real KV cache of SmolLM2-135M-Instruct on standard-library docstrings.

Usage: .venv/bin/python experiments/real_capture.py [--out results/real/capture.npz] [--tokens 256]
                                                    [--layers 0 15 29]

All 26 texts of kvstats.models.texts.STDLIB_SOURCES, truncated to a common N tokens;
every layer (767 MB at N = 256), or only --layers (a sweep's `layer = 15` then reads
model layer 15 of the file, whichever slot holds it).
"""

import argparse
import time

from kvstats.models import capture, load_model
from kvstats.models.texts import STDLIB_SOURCES, stdlib_texts


def main() -> None:
    import torch

    # One thread: on a loaded 2-core machine a second OpenMP thread per small op costs
    # more than it saves (one-token decode steps measured 30x slower with two).
    torch.set_num_threads(1)
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="results/real/capture.npz",
                    help="the .npz to write; missing folders are created "
                         "(default: %(default)s)")
    ap.add_argument("--tokens", type=int, default=256,
                    help="N, the tokens kept of every text: at least 2 and at most the "
                         "shortest text's count (277 with SmolLM2's tokenizer on Python "
                         "3.11) (default: %(default)s)")
    ap.add_argument("--layers", type=int, nargs="+", default=None, metavar="L",
                    help="keep only these model layers (0..29 for SmolLM2; recorded in the "
                         "capture's meta) (default: every layer)")
    args = ap.parse_args()
    t0 = time.time()
    model, tok = load_model()
    try:
        cap = capture(model, tok, stdlib_texts(), max_tokens=args.tokens, layers=args.layers,
                      progress=True)
    except ValueError as err:  # the texts and model are fixed here: only --tokens or --layers can be wrong
        ap.error(f"--tokens {args.tokens} --layers {args.layers}: {err}")
    cap.meta["sources"] = list(STDLIB_SOURCES)
    cap.save(args.out)
    print(f"captured K {cap.K.shape}, q {cap.q.shape} -> {args.out} in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
