"""The built-in schemes' names and one-line summaries, importable without numpy.

One place for both: the registry's entries (:mod:`kvstats.quant.builtin_schemes`) take
their summaries from here and :data:`kvstats.quant.registry.BUILTIN` lists them in this
order (a name here without an entry there, or the reverse, fails at import), and the
command's parser (:mod:`kvstats.cli_parser`), which ``--help`` builds and which must not
import numpy, reads the names from here. Only the standard library is imported.

Examples
--------
>>> NAMES[:3], SUMMARIES["q4_0"]
(('KV', 'KQV', 'QKQV'), 'llama.cpp q4_0: blocks of 32 along d, 4-bit codes, an fp16 scale per block (4.5 bits)')
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["NAMES", "SUMMARIES", "BLOCK_TYPES", "FP8_FORMATS"]

#: llama.cpp block types (ggml-common.h block_q*): code bits, fp16 fields per block of 32
#: (a scale; the "_1" types also a minimum).
BLOCK_TYPES: Mapping[str, tuple[int, int]] = MappingProxyType(
    {"q8_0": (8, 1), "q4_0": (4, 1), "q4_1": (4, 2), "q5_0": (5, 1), "q5_1": (5, 2)})
#: vLLM's FP8 KV-cache formats.
FP8_FORMATS = ("fp8_e4m3", "fp8_e5m2")

#: Every built-in scheme's one-line summary, in the order ``kvstats schemes`` lists them.
SUMMARIES: Mapping[str, str] = MappingProxyType({
    "KV": "K and V: n-bit Lloyd–Max on the unit vector, no rotation, no sketch",
    "KQV": "WHT; K: n-bit Lloyd–Max; V: (n−1)-bit Lloyd–Max + 1-bit QJL residual",
    "QKQV": "WHT; K and V: (n−1)-bit Lloyd–Max + 1-bit QJL residual (= turboquant_prod)",
    "turboquant_mse": "K and V: TurboQuant-mse (rotation + n-bit Lloyd–Max)",
    "turboquant_prod": "K and V: TurboQuant-prod ((n−1)-bit MSE + 1-bit QJL residual)",
    "qjl": "K: QJL sketch with m = n·d rows (+ outlier channels); V: per-token asymmetric uniform "
           "n-bit (QJL paper)",
    "kivi": "KIVI: per-channel keys, per-token values, fp16 scale/zero per group, a full-precision "
            "window of recent tokens",
    "mixed": "key/value mixed precision: K a-bit, V b-bit TurboQuant-mse; also by name, 'K4V2'",
    "identity": "stores K and V unchanged (a reference that must reproduce exactly)",
    **{fmt: f"llama.cpp {fmt}: blocks of 32 along d, {code}-bit codes, an fp16 "
            f"scale{' and minimum' if fields == 2 else ''} per block ({code + 16 * fields / 32:g} bits)"
       for fmt, (code, fields) in BLOCK_TYPES.items()},
    **{fmt: f"FP8 {fmt[4:].upper()} KV cache (vLLM): x/s rounded to FP8, a float32 scale s = "
            "amax/max per head ('head'), per call ('tensor') or static (a float)"
       for fmt in FP8_FORMATS},
    "mxfp4": "OCP MXFP4: blocks of 32 along d, E2M1 elements, an E8M0 scale per block (4.25 bits)",
    "nvfp4": "NVIDIA NVFP4: blocks of 16 along d, E2M1 elements, an E4M3 scale per block and a "
             "float32 scale per head (4.5 bits + 32 per head)",
    "klt": "K and V: principal axes of the other half of the cache, bits by reverse water-filling, "
           "Lloyd–Max per axis (basis and allocation stored)",
})
#: The built-in scheme names (:data:`kvstats.quant.registry.SCHEMES`).
NAMES = tuple(SUMMARIES)
