"""The signatures, records and constants docs/design.md and docs/internals.md quote are
the code's (the names they give: test_docs_drift.py).

A quoted `name(a, b=1)` names parameters the function has, with its defaults; a quoted
`Record(a, b)` of a dataclass or named tuple lists all its fields in order; `NAME = 96`,
`NAME` = 5 or `NAME` (1e-12) is the constant's value, and an ALL_CAPS name under a
module's section of internals.md is that module's. Each check has a mutant it must catch.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import numpy as np
import pytest

from test_docs_drift import PAGES, ROOT, _code_spans, _module_name, _page, loaded_modules
from test_layering import FILES


# --- signatures ------------------------------------------------------------------------------

def _callables() -> dict[str, list]:
    """Every function and class of kvstats and kvstats_gpu by name, and every method by
    ``Class.method`` and by its own name (a page may give either)."""
    index: dict[str, list] = {}
    for module in loaded_modules():
        for name, obj in vars(module).items():
            if not (callable(obj) and getattr(obj, "__module__", "").startswith("kvstats")):
                continue
            index.setdefault(name, []).append(obj)
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if inspect.isfunction(member) or isinstance(member, (staticmethod, classmethod)):
                        for key in (f"{name}.{attr}", attr):
                            index.setdefault(key, []).append(getattr(obj, attr))
    return index


def quoted_signatures(text: str) -> list[tuple[str, list[str], dict[str, str]]]:
    """``(name, parameters, defaults as written)`` of every `name(a, b=1, *, c=None)` a
    page quotes; ``...`` stands for parameters not given, ``x=`` for a default not given.

    What reads as a call rather than a signature gives no parameter names when it has no
    keyword at all (`residual_inflation(d, d_pad)`: values) and no defaults when it starts
    with ``...`` and has no ``*`` (`energy_test_sequential(..., paired=True)`). Spans whose
    parameters are not Python otherwise (prose) are skipped."""
    out = []
    flat = re.sub(r"\s*\n\s*", " ", text)
    for name, written in re.findall(r"`((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)\(([^`]*)\)", flat):
        args = re.sub(r"(\w+) \([^()]*\)", r"\1", written)   # a shape after a name: x (*batch, d)
        args = re.sub(r"(\w+)=(?=\s*[,)]|\s*$)", r"\1=...", args)     # x= -> x=...
        args = re.sub(r"(^|,)\s*\.\.\.\s*(?=,|$)", r"\1", args).strip(", ")  # a bare ... item
        try:
            spec = ast.parse(f"def f({args}): pass").body[0].args
        except SyntaxError:
            continue
        positional = spec.posonlyargs + spec.args
        defaults = dict(zip([a.arg for a in positional[len(positional) - len(spec.defaults):]],
                            map(ast.unparse, spec.defaults)))
        defaults.update({a.arg: ast.unparse(d) for a, d in zip(spec.kwonlyargs, spec.kw_defaults) if d})
        if written.lstrip().startswith("...") and "*" not in written:   # a call's keywords
            out.append((name, list(defaults), {}))
        elif defaults or "*" in written:
            out.append((name, [a.arg for a in positional + spec.kwonlyargs], defaults))
    return out


def _literal(node: ast.expr):
    """The value a page writes: a Python literal, ``a**b``, or a numpy type (``np.float16``,
    ``float64``); ValueError for anything else (a name of the code's)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        return _literal(node.left) ** _literal(node.right)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("np", "numpy"):
        return getattr(np, node.attr)
    if isinstance(node, ast.Name) and isinstance(getattr(np, node.id, None), type):
        return getattr(np, node.id)
    return ast.literal_eval(node)


def _same_default(written: str, actual) -> bool:
    """Whether a default as a page writes it is the code's: a literal, a numpy type, or
    alternatives ``"a" | "b"`` of which the default is the first; a name of the code's
    (``seed=scheme_seed``, ``digits=LABEL_DIGITS=4``) is not read."""
    try:
        node = ast.parse(written, mode="eval").body
    except SyntaxError:
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr) and isinstance(node.left, ast.Constant):
        node = node.left
    try:
        value = _literal(node)
    except (ValueError, TypeError, AttributeError):
        return True
    if value is Ellipsis:   # written x= or x=...: not given
        return True
    if isinstance(actual, (np.dtype, type)):
        return np.dtype(value) == np.dtype(actual)
    return type(value) is type(actual) and value == actual


def signature_mismatches(text: str, index) -> list[str]:
    bad = []
    for name, params, defaults in quoted_signatures(text):
        key = name if name in index else ".".join(name.split(".")[-2:])
        candidates = {id(obj): obj for obj in index.get(key) or index.get(name.split(".")[-1], [])}.values()
        if not candidates:
            continue   # not ours (SeedSequence, min, site.getsitepackages)
        problems = []
        for obj in candidates:
            try:
                sig = inspect.signature(obj)
            except (TypeError, ValueError):
                problems = []
                break
            found = sig.parameters
            open_kwargs = any(p.kind is p.VAR_KEYWORD for p in found.values())
            wrong = [f"no parameter {p}" for p in params if p not in found and not open_kwargs and p != "self"]
            wrong += [f"{p}={d} (code: {found[p].default!r})" for p, d in defaults.items()
                      if p in found and not _same_default(d, found[p].default)]
            if not wrong:
                problems = []
                break
            problems.append(f"{obj.__module__}.{obj.__qualname__}: {', '.join(wrong)}")
        if problems:
            bad.append(f"{name}: " + "; ".join(problems))
    return bad


@pytest.fixture(scope="module")
def index():
    return _callables()


@pytest.mark.parametrize("page", PAGES)
def test_quoted_signatures_match_the_code(page, index):
    """Each parameter a quoted signature names exists, and each default it writes is the
    code's (the page may leave parameters out)."""
    assert signature_mismatches(_page(page), index) == []


@pytest.mark.parametrize("quoted, expected", [
    ("`make_rotation(kind, dim, seed=1, draws=())`", "seed=1"),
    ("`MSEQuantizer(dim, bits, rotation=\"haar\")`", "rotation"),
    ("`GrowingBuffer(step=1)`", "step=1"),
    ("`make_sketch(kind, m, dimension, seed=0)`", "no parameter dimension"),
    ("`water_fill(eigenvals (*batch, d), rate, signal_power=None)`", "no parameter eigenvals"),
    ("`e2m1_encode(y, ties=\"down\"|\"even\")`", "ties"),
    ("`MSEQuantizer(dim, bits, norm_dtype=np.float32)`", "norm_dtype"),
])
def test_a_wrong_signature_is_found(index, quoted, expected):
    found = signature_mismatches(quoted, index)
    assert len(found) == 1 and expected in found[0], found
    right = "`make_rotation(kind, dim, seed=0, draws=())` `e2m1_encode(y, ties=\"even\"|\"down\")`"
    assert signature_mismatches(right + " `MSEQuantizer(dim, bits, norm_dtype=np.float16)`", index) == []


def _top_level_items(args: str) -> list[str]:
    """``args`` split at its commas outside brackets (``(..)``, ``<..>``, ``[..]``)."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(args):
        depth += (char in "(<[") - (char in ")>]")
        if char == "," and depth == 0:
            items.append(args[start:i])
            start = i + 1
    return [*items, args[start:]]


def record_mismatches(text: str, index) -> list[str]:
    """A quoted `Record(a, b, c)` of a dataclass or named tuple of ours lists its fields,
    all of them and in order (each item's first name: `K (T, N, d)`, `norms=<float16>`)."""
    import dataclasses

    bad = []
    for name, args in re.findall(r"`((?:[A-Za-z_]\w*\.)*[A-Z]\w*)\(([^`]*)\)", re.sub(r"\s*\n\s*", " ", text)):
        for cls in {id(obj): obj for obj in index.get(name.split(".")[-1], [])}.values():
            if dataclasses.is_dataclass(cls):
                fields = [f.name for f in dataclasses.fields(cls) if f.init]
            elif inspect.isclass(cls) and issubclass(cls, tuple) and hasattr(cls, "_fields"):
                fields = list(cls._fields)
            else:
                continue
            written = [re.match(r"\s*(\w*)", item).group(1) for item in _top_level_items(args)]
            if written != fields:
                bad.append(f"{name}({', '.join(written)}): the fields are {fields}")
    return bad


@pytest.mark.parametrize("page", PAGES)
def test_quoted_records_list_their_fields(page, index):
    assert record_mismatches(_page(page), index) == []


def test_a_record_missing_a_field_is_found(index):
    assert record_mismatches("`CaptureHeader(n_texts, n_layers, n_keys, dim, n_q_heads, fingerprint)`", index) == [
        "CaptureHeader(n_texts, n_layers, n_keys, dim, n_q_heads, fingerprint): the fields are "
        "['n_texts', 'n_layers', 'n_kv_heads', 'n_keys', 'dim', 'n_q_heads', 'fingerprint', "
        "'arrays_fingerprint']"]
    assert record_mismatches("`QJLCodes(signs=<packed uint8 (..., ceil(m/8))>, norms=<float16>, m)`", index) == []


# --- constants --------------------------------------------------------------------------------

def _constants() -> dict[str, list]:
    """Module-level ALL_CAPS (or _ALL_CAPS) values of kvstats and kvstats_gpu, by name."""
    values: dict[str, list] = {}
    for module in loaded_modules():
        for name, value in vars(module).items():
            if re.fullmatch(r"_?[A-Z][A-Z0-9_]*", name) and not inspect.ismodule(value):
                values.setdefault(name, []).append(value)
    return values


def stated_constants(text: str) -> list[tuple[str, object]]:
    """``(NAME, value)`` for `NAME = value`, `NAME` = value and `NAME` (value) where the
    value is a Python literal (a number, possibly with a unit after it, or a `quoted`
    string)."""
    flat = re.sub(r"\s*\n\s*", " ", text)
    found = []
    name = r"(_?[A-Z][A-Z0-9_]+)"
    number = r"(-?\d[\d_]*(?:\.\d+)?(?:e-?\d+)?(?:\*\*\d+)?)"
    for n, v in re.findall(rf"`{name} = ([^`]+)`", flat):
        found.append((n, v))
    for n, v in re.findall(rf"`{name}` (?:= )?\(?{number}(?=[)\s,;:]|\.\s|-[a-z]|$)", flat):
        found.append((n, v))
    for n, v in re.findall(rf"`{name}` = `([^`]+)`", flat):
        found.append((n, v if v[0] in "\"'" else repr(v)))   # `"hf:fp8"` or `.report-staging-`
    out = []
    for n, v in found:
        try:
            out.append((n, _literal(ast.parse(v, mode="eval").body)))
        except (ValueError, SyntaxError, TypeError, AttributeError):
            continue
    return out


def _agrees(stated, actual) -> bool:
    if isinstance(actual, re.Pattern):
        actual = actual.pattern.removeprefix("^").removesuffix("$")
    if isinstance(actual, (dict, frozenset, set)) or (isinstance(actual, tuple) and not isinstance(stated, tuple)):
        return stated in actual
    return type(stated) in (int, float) and type(actual) in (int, float) and stated == actual or stated == actual


def constant_mismatches(text: str, constants) -> list[str]:
    return [f"{name} = {value!r} (code: {constants[name]!r})" for name, value in stated_constants(text)
            if name in constants and not any(_agrees(value, actual) for actual in constants[name])]


@pytest.fixture(scope="module")
def constants():
    return _constants()


@pytest.mark.parametrize("page", PAGES)
def test_stated_constants_are_the_code_s(page, constants):
    stated = stated_constants(_page(page))
    assert stated, "no constant found: the pattern no longer reads the page"
    assert constant_mismatches(_page(page), constants) == []


@pytest.mark.parametrize("stated", ["`MIN_KEYS` = 6", "`_BLAS_ROWS = 64`", "`ROUNDING_RTOL` (1e-10)",
                                    "`STAGING_PREFIX` = `.staging-`", "`PAGE` = 128-token",
                                    '`ROTATIONS = ("hadamard", "haar")`'])
def test_a_wrong_constant_is_found(constants, stated):
    assert len(constant_mismatches(stated, constants)) == 1


def module_sections(text: str) -> list[tuple[str, list[str], str]]:
    """internals.md's text by the module it documents: ``(heading, modules, text)`` for
    each ``### a.py, b.py`` heading and each bullet that starts with a module's file
    (``- `trials.py`:``, ``- `kvstats/plugins.py` ...``), up to the next heading or bullet;
    a file is looked up in the package of the ``## kvstats.x`` heading above, else
    anywhere in kvstats and kvstats_gpu."""
    files: dict[str, list[Path]] = {}
    for path in FILES:
        files.setdefault(path.name, []).append(path)
    sections, current, package = [], None, ""
    for line in text.splitlines():
        if line.startswith("## "):
            package, current = line[3:].split(",")[0].strip().replace(".", "/"), None
            continue
        head = re.match(r"### (.*)|(\s*)- `?((?:kvstats/)?\w+\.py)`?[ :,(]", line)
        bullet = re.match(r"(\s*)- ", line)
        if head and head.group(1) is None and current is not None and current[3] < 0:
            head = None   # a bullet of a heading's modules (### rotation.py, walsh_hadamard.py)
        if head:
            names = re.findall(r"\w+\.py", head.group(1) or head.group(3))
            paths = [p for n in names for p in ([p for p in files.get(n, [])
                                                  if str(p.relative_to(ROOT)).startswith(package + "/")]
                                                 or files.get(n, []))]
            # a heading's section runs to the next heading, a bullet's to the next bullet as deep
            depth = -1 if head.group(1) is not None else len(head.group(2))
            current = (line.strip(), sorted({_module_name(p) for p in paths}), [], depth)
            sections.append(current)
        elif bullet and current is not None and len(bullet.group(1)) <= current[3]:
            current = None
        if current is not None:
            current[2].append(line)
    return [(head, modules, "\n".join(lines)) for head, modules, lines, _ in sections]


def misplaced_constants(text: str, constants) -> list[str]:
    """ALL_CAPS names a module's section gives (not dotted) that are no attribute of its
    modules: a constant of another module, or none of the code's at all (an environment
    variable, a scheme name or a placeholder is a word of the sources)."""
    loaded_modules()   # imported once, quietly
    sources = set(re.findall(r"\w+", "\n".join(
        p.read_text(encoding="utf-8") for top in ("kvstats", "kvstats_gpu", "experiments", "tests")
        for p in sorted((ROOT / top).rglob("*"))
        if p.suffix in (".py", ".sh", ".toml") and p != Path(__file__).resolve())))
    bad = []
    for head, modules, body in module_sections(text):
        loaded = [importlib.import_module(m) for m in modules]
        for span in _code_spans(body):
            for name in re.findall(r"(?<![\w.])(_?[A-Z][A-Z0-9_]{2,})\b(?!\.)", span):
                if any(hasattr(m, name) for m in loaded):
                    continue
                if name in constants or name not in sources:
                    bad.append(f"{name} under {head[:50]!r} ({', '.join(modules)})")
    return sorted(set(bad))


def test_constants_live_where_internals_says(constants):
    assert misplaced_constants(_page("internals.md"), constants) == []


def test_a_constant_under_another_module_is_found(constants):
    text = _page("internals.md")
    moved = text.replace("`_BLAS_ROWS = 96`", "`_BLAS_ROW = 96`", 1)
    assert [m.split(" ")[0] for m in misplaced_constants(moved, constants)] == ["_BLAS_ROW"]
    wrong_home = "## kvstats.data\n- `trials.py`: `Trials`, `MIN_KEYS` = 5\n"
    assert [m.split(" ")[0] for m in misplaced_constants(wrong_home, constants)] == ["MIN_KEYS"]


