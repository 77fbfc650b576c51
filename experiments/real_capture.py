"""Capture the real KV cache of SmolLM2-135M-Instruct on standard-library docstrings.

Usage: .venv/bin/python experiments/real_capture.py [--out results/real/capture.npz] [--tokens 256]

All 26 texts of kvstats.models.texts.STDLIB_SOURCES, truncated to a common N tokens.
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
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="results/real/capture.npz")
    ap.add_argument("--tokens", type=int, default=256)
    args = ap.parse_args()
    t0 = time.time()
    model, tok = load_model()
    cap = capture(model, tok, stdlib_texts(), max_tokens=args.tokens, progress=True)
    cap.meta["sources"] = list(STDLIB_SOURCES)
    cap.save(args.out)
    print(f"captured K {cap.K.shape}, q {cap.q.shape} -> {args.out} in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
