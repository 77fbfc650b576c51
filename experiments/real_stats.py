"""What do real KV caches look like? Outlier channels, tails, rank, norms, weight norms.

Usage: .venv/bin/python experiments/real_stats.py [--capture results/real/capture.npz] [--out results/real]

Writes results/real/stats_layer_head.csv (one row per layer and KV head) and
results/real/weights.csv (one row per layer and KV head, and per layer: ``head`` "all"; only
for a capture of load_model()'s model, whose weights these are). ``layer`` is the model
layer: a capture of some layers only (real_capture.py --layers 0 15 29) records which
(``meta["layers"]``), and the weights are those of these layers alone. The capture is read
and checked by kvstats.data.capture_format.read_capture. The keys are post-RoPE keys (what
the cache stores; a capture holds no others, ``meta["post_rope"]``): every key statistic
below is of the keys after the position-dependent rotation, which mixes channel pairs
(i, i + d/2) over positions. Before RoPE the same keys differ (docs/real_model.md,
"Findings": in layers 0, 15 and 29 about half the effective rank and heavier tails within
a channel). Definitions (also in docs/real_model.md):

- outlier channel (keys): a channel whose RMS over all tokens of all texts exceeds
  OUTLIER_RATIO times the median channel RMS of that (layer, head);
- excess kurtosis: of all coordinates pooled (``kurt_pooled``: mixes channel scales),
  mean over channels of each channel's standardized coordinates (``kurt_channel``: tails
  within a channel), and of the coordinates of the randomized-Hadamard-rotated unit
  vectors times sqrt(d) (``kurt_wht``; the sphere value is -6/(d+2) = -0.09 for d=64);
- effective rank: exp(Shannon entropy) of the normalized eigenvalues of the uncentered
  second-moment matrix (Roy & Vetterli 2007), and the number of eigen-directions holding
  90% of the energy;
- norms: E||k||^2, E||v||^2 over tokens; ||W_K||, ||W_V|| (Frobenius and spectral) per
  layer and per KV head (rows of k_proj/v_proj of that head).
"""

import argparse
import os

import numpy as np
import pandas as pd

OUTLIER_RATIO = 4.0


def excess_kurtosis(x, axis):
    x = x - x.mean(axis=axis, keepdims=True)
    m2 = (x ** 2).mean(axis=axis)
    return (x ** 4).mean(axis=axis) / m2 ** 2 - 3.0


def eig_stats(x):
    """x: (..., n, d) -> effective rank and 90%-energy rank of the second-moment matrix."""
    m = np.einsum("...nd,...ne->...de", x, x) / x.shape[-2]
    lam = np.clip(np.linalg.eigvalsh(m)[..., ::-1], 0, None)
    p = lam / lam.sum(-1, keepdims=True)
    ent = -(p * np.log(np.where(p > 0, p, 1))).sum(-1)
    r90 = (np.cumsum(p, -1) < 0.9).sum(-1) + 1
    return np.exp(ent), r90


def wht_unit(x, seed=0):
    from kvstats.quant.rotation import make_rotation

    rot = make_rotation("hadamard", x.shape[-1], seed=seed)
    u = x / np.linalg.norm(x, axis=-1, keepdims=True)
    return rot.apply(u) * np.sqrt(x.shape[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--capture", default="results/real/capture.npz")
    ap.add_argument("--out", default="results/real")
    args = ap.parse_args()
    from kvstats.data.capture_format import held_layers, read_capture

    # the format's checks (version, post_rope, dtypes, shapes, meta["layers"], CRC-32), not a
    # bare np.load; mapped, so that q (most of the file: more query than KV heads) is never read
    K, V, _, meta = read_capture(args.capture, "--capture", mapped=True)
    # one at a time, so that K's mapped pages are let go before V's are read
    K = np.asarray(K, np.float64)  # (T, L, H, N, d)
    V = np.asarray(V, np.float64)
    source = meta.get("source")
    T, L, H, N, d = K.shape
    # slot l of a partial capture holds model layer layers[l]: the rows name model layers
    layers = held_layers(meta, L, "--capture's meta", repr(args.capture))
    # pool texts and positions: (L, H, T*N, d)
    Kp = K.transpose(1, 2, 0, 3, 4).reshape(L, H, T * N, d)
    Vp = V.transpose(1, 2, 0, 3, 4).reshape(L, H, T * N, d)
    rows = []
    for name, X in (("K", Kp), ("V", Vp)):
        rms = np.sqrt((X ** 2).mean(-2))  # (L, H, d)
        ratio = rms / np.median(rms, -1, keepdims=True)
        n_out = (ratio > OUTLIER_RATIO).sum(-1)
        k_pool = excess_kurtosis(X.reshape(L, H, -1), -1)
        k_chan = excess_kurtosis(X, -2).mean(-1)
        k_wht = excess_kurtosis(wht_unit(X).reshape(L, H, -1), -1)
        erank, r90 = eig_stats(X)
        sq = (X ** 2).sum(-1)
        first = (K if name == "K" else V)[:, :, :, 0, :]  # position 0 (attention sink)
        sq_first = (first ** 2).sum(-1).mean(0)  # (L, H)
        for l in range(L):
            for h in range(H):
                rows.append(dict(tensor=name, layer=layers[l], head=h, n_outlier_channels=int(n_out[l, h]),
                                 outlier_channels=" ".join(map(str, np.flatnonzero(ratio[l, h] > OUTLIER_RATIO))),
                                 max_channel_ratio=float(ratio[l, h].max()),
                                 kurt_pooled=float(k_pool[l, h]), kurt_channel=float(k_chan[l, h]),
                                 kurt_wht=float(k_wht[l, h]), effective_rank=float(erank[l, h]),
                                 rank90=int(r90[l, h]), mean_sq_norm=float(sq[l, h].mean()),
                                 mean_sq_norm_pos0=float(sq_first[l, h]),
                                 mean_sq_norm_rest=float(sq[l, h].reshape(T, N)[:, 1:].mean())))
    stats = pd.DataFrame(rows)
    os.makedirs(args.out, exist_ok=True)
    stats.to_csv(os.path.join(args.out, "stats_layer_head.csv"), index=False)
    print(stats.groupby("tensor")[["n_outlier_channels", "kurt_pooled", "kurt_channel", "kurt_wht",
                                   "effective_rank", "rank90", "mean_sq_norm"]].mean())

    from kvstats.models import load_model

    model, _ = load_model()
    weights = os.path.join(args.out, "weights.csv")
    if source != model._kvstats_source:
        # the weight norms sit beside the capture's E|k|^2 in the report: another model's
        # capture must not get SmolLM2's weights (nor keep those of an earlier run)
        if os.path.exists(weights):
            os.remove(weights)
        print(f"{weights} not written: the capture's model is {source!r}, not load_model()'s "
              f"{model._kvstats_source!r}")
        return
    n_model = len(model.model.layers)
    if max(layers) >= n_model:
        raise ValueError(f"--capture's meta 'layers' must name layers of load_model()'s model (0 .. "
                         f"{n_model - 1}); {args.capture!r} records {list(layers)}")
    wrows = []
    for l in layers:   # the captured layers only: the report sets them beside their E|k|^2
        a = model.model.layers[l].self_attn
        for name, w in (("K", a.k_proj.weight), ("V", a.v_proj.weight)):
            w = w.detach().double().numpy()
            for h in range(-1, H):
                wh = w if h < 0 else w[h * d:(h + 1) * d]
                wrows.append(dict(tensor=name, layer=l, head=h if h >= 0 else "all",
                                  frobenius=float(np.linalg.norm(wh)),
                                  spectral=float(np.linalg.norm(wh, 2))))
    pd.DataFrame(wrows).to_csv(weights, index=False)


if __name__ == "__main__":
    main()
