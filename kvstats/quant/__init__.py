"""Quantizers: rotations, Lloyd--Max codebooks, bit packing, the MSE (TurboQuant-mse)
quantizer, QJL sketches and TurboQuant-prod, KIVI-style uniform quantization, and the
scheme registry. Names are imported lazily (on first access) so ``import kvstats.quant``
stays cheap and the submodules can import each other without cycles.
"""

from __future__ import annotations

from kvstats._lazy import lazy_exports

# public name -> submodule that defines it
_EXPORTS = {
    # rotation.py
    "ROTATIONS": "rotation", "Rotation": "rotation", "make_rotation": "rotation",
    "fwht": "rotation", "hadamard": "rotation", "next_pow2": "rotation",
    "normalize_draws": "rotation",
    # codebook.py
    "Codebook": "codebook", "lloyd_max_codebook": "codebook", "empirical_codebook": "codebook",
    # packing.py
    "pack_bits": "packing", "unpack_bits": "packing", "pack_codes": "packing",
    "unpack_codes": "packing", "packed_size": "packing",
    # mse.py
    "MSEQuantizer": "mse", "MSECodes": "mse",
    # sketch.py, qjl.py, prod.py, qjl_keys.py
    "SKETCHES": "sketch", "Sketch": "sketch", "make_sketch": "sketch", "QJLCodes": "qjl",
    "qjl_encode": "qjl", "qjl_scores": "qjl", "qjl_reconstruct": "qjl", "ProdCodes": "prod",
    "ProdQuantizer": "prod", "QJLKeyCodes": "qjl_keys", "QJLKeyQuantizer": "qjl_keys",
    # uniform.py
    "UniformCodes": "uniform", "uniform_quantize": "uniform", "uniform_dequantize": "uniform",
    "KIVICodes": "uniform", "KIVIQuantizer": "uniform", "UniformTokenCoder": "uniform",
    "KIVISideCodes": "uniform", "KIVIKeyCoder": "uniform", "KIVIValueCoder": "uniform",
    # coder.py, registry.py, export.py
    "Coder": "coder", "ExportableCoder": "coder", "IdentityCoder": "coder",
    "IdentityCodes": "coder", "check_norm_range": "coder", "SchemeDef": "registry", "REGISTRY": "registry",
    "scheme_def": "registry", "parse_scheme_name": "registry", "SideExport": "export",
    "SchemeExport": "export",
    # blockfmt.py, fp8.py, microscaling.py, klt.py (deployed formats, the klt coder)
    "BlockTypeCoder": "blockfmt", "BlockCodes": "blockfmt", "block_encode": "blockfmt",
    "block_decode": "blockfmt", "FP8Coder": "fp8", "FP8Codes": "fp8", "MXCoder": "microscaling",
    "MXCodes": "microscaling", "KLTCoder": "klt", "KLTCodes": "klt", "water_fill_bits": "klt",
    # register.py, contract.py (schemes of your own, the contract every scheme passes)
    "define_scheme": "register", "register_scheme": "register", "unregister_scheme": "register",
    "registered_scheme": "register", "scheme_names": "register", "user_schemes": "register",
    "check_scheme": "contract", "SchemeContractError": "contract",
    # schemes.py
    "SCHEMES": "schemes", "make_scheme": "schemes", "BitBudget": "schemes", "Scheme": "schemes",
    "SchemeCodes": "schemes",
}
_SUBMODULES = {"rotation", "codebook", "packing", "mse", "sketch", "qjl", "prod", "qjl_keys",
               "uniform", "coder", "registry", "export", "schemes", "blockfmt", "fp8",
               "microscaling", "klt", "register", "contract", "schemedef", "builtin_schemes"}

__all__, __getattr__, __dir__ = lazy_exports(
    __name__, globals(), {name: f"kvstats.quant.{module}" for name, module in _EXPORTS.items()},
    _SUBMODULES)
