"""docs/design.md and docs/internals.md name what the code has.

Cheap mechanical checks of what the two architecture pages state in a parseable way: the
files and dotted names they give exist, design.md's module tree lists every module (and
in test_layering's order), the signatures and constants they quote agree with the code,
and the classes whose every member they describe still have no other. Each check reads
the page; a renamed function, a new module, a changed default or a new registry method
fails here until the page follows.
"""
from __future__ import annotations

import ast
import inspect
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from test_layering import LAYERS, ROOT, _module_name
from test_readme import _resolves

PAGES = ("design.md", "internals.md")


def _page(name: str) -> str:
    return (ROOT / "docs" / name).read_text(encoding="utf-8")


def _code_spans(text: str) -> list[str]:
    """The text of every `...` span (a span may run over a line break)."""
    return re.findall(r"`([^`]+)`", text)


# --- files and dotted names ---------------------------------------------------------------

#: the folders a path in the pages starts from
TOP = ("kvstats", "kvstats_gpu", "experiments", "tests", "docs", "examples")
SOURCE = [p for top in TOP for p in (ROOT / top).rglob("*") if p.is_file()]
BASENAMES = {p.name for p in SOURCE}


def named_paths(text: str) -> list[str]:
    """Repository paths (``kvstats/sweep/run.py``, ``tests/models/``), package-relative
    module paths (``quant/coder.py``) and bare module names (``mse_kernels.py``) of a page;
    not part of a longer name (``<kvstats cache>/kernels``, ``tables/*.csv``)."""
    return re.findall(r"(?<![\w./<*-])((?:\w+/)*\w+\.py|(?:%s)/[\w/.-]*\w/?)" % "|".join(TOP), text)


def missing_paths(text: str) -> list[str]:
    missing = []
    for path in sorted(set(named_paths(text))):
        if "/" not in path:
            found = path in BASENAMES
        elif path.split("/", 1)[0] in TOP:
            found = (ROOT / path).exists()
        else:   # relative to a package: quant/coder.py, models/attention_hook.py
            found = any((ROOT / top / path).exists() for top in ("kvstats", "kvstats_gpu"))
        if not found:
            missing.append(path)
    return missing


@pytest.mark.parametrize("page", PAGES)
def test_every_file_the_page_names_exists(page):
    assert missing_paths(_page(page)) == []


def test_a_renamed_file_is_found():
    text = _page("design.md").replace("walsh_hadamard.py", "hadamard_transform.py", 1)
    assert missing_paths(text) == ["hadamard_transform.py"]
    assert missing_paths("see `sweep/lock.py` and experiments/gpu_run.sh") == [
        "experiments/gpu_run.sh", "sweep/lock.py"]


def dotted_names(text: str) -> list[str]:
    # not part of a file name (DIR/.kvstats.lock) or of a module-name pattern (kvstats_plugin_<stem>)
    return sorted(set(re.findall(r"(?<![.\w/])kvstats(?:_gpu)?(?:\.[A-Za-z_]\w*)+", text)))


@pytest.mark.parametrize("page", PAGES)
def test_every_dotted_name_resolves(page):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # importing the GPU and model modules may warn
        assert [name for name in dotted_names(_page(page)) if not _resolves(name)] == []


def test_a_renamed_dotted_name_is_found():
    text = "`kvstats.results.check_comparisons` and `kvstats.plugins.relocate_plugin`"
    assert [name for name in dotted_names(text) if not _resolves(name)] == ["kvstats.plugins.relocate_plugin"]


def unknown_flags(text: str) -> list[str]:
    """``--flags`` of a page that no command or script of the repository defines (its
    argparse calls and shell scripts: the flag must appear in one, whole)."""
    sources = "\n".join(p.read_text(encoding="utf-8") for top in ("kvstats", "kvstats_gpu", "experiments")
                        for p in sorted((ROOT / top).rglob("*")) if p.suffix in (".py", ".sh"))
    return sorted(flag for flag in set(re.findall(r"(?<![\w-])--[a-z][a-z-]*[a-z]", text))
                  if not re.search(rf"{flag}(?![\w-])", sources))


@pytest.mark.parametrize("page", PAGES)
def test_every_flag_the_page_gives_exists(page):
    assert unknown_flags(_page(page)) == []


def test_a_misspelt_flag_is_found():
    assert unknown_flags("`kvstats report --plugin PATH`, `--no-figure`, `--dry-run`") == [
        "--no-figure", "--plugin"]


# --- design.md's module tree ----------------------------------------------------------------

def module_tree(design: str) -> list[tuple[str, set[str]]]:
    """design.md's tree as ``[(first entry's module, every module the entry names)]``, in
    order: an entry is a line at the block's outer indent and the lines below it; it names
    the module or package of its first column, and a package entry names each ``x.py``
    of its lines (a path such as ``quant/catalog.py`` points elsewhere)."""
    block = re.search(r"\n\n((?:    kvstats/.*\n)(?:(?:    .*)?\n)+)", design).group(1)
    entries: list[list[str]] = []
    for line in block.splitlines():
        if re.match(r"    \S", line):
            entries.append([line])
        elif line.strip():
            entries[-1].append(line)
    tree = []
    for lines in entries:
        first = re.split(r"\s{2,}", lines[0].strip())[0]
        names = re.findall(r"(?<![\w/])\w+\.py\b", "\n".join(lines))
        if first.endswith("/"):                       # a package and its modules
            package = first.rstrip("/").replace("/", ".")
            modules = {package} | {f"{package}.{n[:-3]}" for n in names}
        elif first == "beside the layers":
            package, modules = None, set()
        else:                                         # a top-level module, maybe more on its line
            package = _module_name(ROOT / first.split(",")[0])
            modules = {package}
        if not first.endswith("/"):
            modules |= {_module_name(ROOT / "kvstats" / n) for n in names}
        # a module written as its path (beside the layers: kvstats/plugins.py)
        modules |= {_module_name(ROOT / path) for path in
                    re.findall(r"(?<![\w/])(kvstats(?:_gpu)?/\w+\.py)", "\n".join(lines))}
        tree.append((package, modules))
    return tree


def test_design_tree_lists_every_module_and_no_other():
    """Every module file of kvstats and kvstats_gpu is in design.md's tree (a package's
    ``__init__`` by the package), and every module the tree names exists."""
    tree = module_tree(_page("design.md"))
    listed = set().union(*(modules for _, modules in tree))
    files = sorted(ROOT.glob("kvstats/**/*.py")) + sorted(ROOT.glob("kvstats_gpu/**/*.py"))
    actual = {_module_name(p) for p in files}
    assert sorted(actual - listed) == [], "modules missing from design.md's tree"
    assert sorted(listed - actual) == [], "modules design.md's tree names that do not exist"


def test_design_tree_is_in_the_layer_order_test_layering_checks():
    first = [package for package, _ in module_tree(_page("design.md")) if package]
    # its first line is kvstats/__init__.py, _lazy.py: both top of the list
    assert ["kvstats", "kvstats._lazy", *first[1:]] == list(LAYERS)


def test_a_module_left_out_of_the_tree_is_found():
    design = _page("design.md")
    assert "        pool.py " in design
    tree = module_tree(design.replace("        pool.py ", "        pools.py", 1))
    listed = set().union(*(modules for _, modules in tree))
    assert "kvstats.sweep.pool" not in listed and "kvstats.sweep.pools" in listed
    swapped = design.replace("    kvstats/data/", "    kvstats/dat/", 1)
    assert [p for p, _ in module_tree(swapped) if p and p.startswith("kvstats.dat")] == ["kvstats.dat"]


# --- signatures ------------------------------------------------------------------------------

def _callables() -> dict[str, list]:
    """Every function and class of kvstats and kvstats_gpu by name, and every method by
    ``Class.method`` and by its own name (a page may give either)."""
    import importlib

    index: dict[str, list] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        modules = []
        for path in sorted(ROOT.glob("kvstats/**/*.py")) + sorted(ROOT.glob("kvstats_gpu/**/*.py")):
            try:
                modules.append(importlib.import_module(_module_name(path)))
            except ImportError:   # an extra that is not installed
                continue
    for module in modules:
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
    parameters are not Python (shapes, prose) are skipped."""
    out = []
    flat = re.sub(r"\s*\n\s*", " ", text)
    for name, written in re.findall(r"`((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)\(([^`]*)\)", flat):
        args = re.sub(r"(\w+)=(?=\s*[,)]|\s*$)", r"\1=...", written)     # x= -> x=...
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


def _same_default(written: str, actual) -> bool:
    """Whether a default as a page writes it is the code's: a literal, a numpy name, or
    alternatives ``"a" | "b"`` of which the default is the first; a name of the code's
    (``seed=scheme_seed``, ``digits=LABEL_DIGITS=4``) is not read."""
    if written == "...":
        return True
    try:
        node = ast.parse(written, mode="eval").body
    except SyntaxError:
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr) and isinstance(node.left, ast.Constant):
        node = node.left
    try:
        value = eval(compile(ast.Expression(node), "<doc>", "eval"), {"np": np, **vars(np)})
    except Exception:
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
        "['n_texts', 'n_layers', 'n_kv_heads', 'n_keys', 'dim', 'n_q_heads', 'fingerprint']"]
    assert record_mismatches("`QJLCodes(signs=<packed uint8 (..., ceil(m/8))>, norms=<float16>, m)`", index) == []


# --- constants --------------------------------------------------------------------------------

def _constants() -> dict[str, list]:
    """Module-level ALL_CAPS (or _ALL_CAPS) values of kvstats and kvstats_gpu, by name."""
    import importlib

    values: dict[str, list] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path in sorted(ROOT.glob("kvstats/**/*.py")) + sorted(ROOT.glob("kvstats_gpu/**/*.py")):
            try:
                module = importlib.import_module(_module_name(path))
            except ImportError:
                continue
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
            out.append((n, ast.literal_eval(v) if "**" not in v else eval(v, {})))
        except (ValueError, SyntaxError):
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
    for path in sorted(ROOT.glob("kvstats/**/*.py")) + sorted(ROOT.glob("kvstats_gpu/**/*.py")):
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
    import importlib

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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert misplaced_constants(_page("internals.md"), constants) == []


def test_a_constant_under_another_module_is_found(constants):
    text = _page("internals.md")
    moved = text.replace("`_BLAS_ROWS = 96`", "`_BLAS_ROW = 96`", 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert [m.split(" ")[0] for m in misplaced_constants(moved, constants)] == ["_BLAS_ROW"]
        wrong_home = "## kvstats.data\n- `trials.py`: `Trials`, `MIN_KEYS` = 5\n"
        assert [m.split(" ")[0] for m in misplaced_constants(wrong_home, constants)] == ["MIN_KEYS"]


# --- classes whose members the pages list -----------------------------------------------------

def _public_members(cls) -> set[str]:
    names = {n for n in getattr(cls, "__dataclass_fields__", {}) if not n.startswith("_")}
    names |= {n for n, m in vars(cls).items() if not n.startswith("_")
              and (inspect.isfunction(m) or isinstance(m, property))}
    return names


def _section(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def _listed(cls, section: str) -> list[str]:
    spans = _code_spans(section)
    return sorted(n for n in _public_members(cls) if not any(re.search(rf"\b{n}\b", span) for span in spans))


def test_design_registry_table_lists_every_schemedef_member():
    """design.md's table of the registry names each field and method of SchemeDef but
    the entry's own name, summary and example parameters (the builder as 'builder')."""
    from kvstats.quant.schemedef import SchemeDef

    table = _section(_page("design.md"), "## The scheme registry", "## The coder protocol")
    assert _listed(SchemeDef, table.replace("builder", "`build`")) == [
        "example_params", "name", "summary"]


def test_internals_registry_lists_every_schemedef_member():
    from kvstats.quant.schemedef import SchemeDef

    section = _section(_page("internals.md"), "### registry.py, schemedef.py", "### register.py")
    assert _listed(SchemeDef, section) == []


def test_design_coder_protocol_lists_every_member():
    from kvstats.quant.coder import Coder, ExportableCoder

    section = _section(_page("design.md"), "## The coder protocol", "## The sweep")
    assert _listed(Coder, section) + _listed(ExportableCoder, section) == []


def test_internals_names_every_coder():
    """Each class of kvstats.quant with the coder protocol's methods is named among the
    protocol's implementers in internals.md's coder.py section."""
    import importlib

    methods = ("encode", "decode", "roundtrip", "stored_bits", "describe")
    coders = {name for path in sorted((ROOT / "kvstats" / "quant").glob("*.py"))
              for name, obj in vars(importlib.import_module(f"kvstats.quant.{path.stem}")).items()
              if inspect.isclass(obj) and not name.startswith("_") and obj.__module__.endswith(path.stem)
              and all(callable(getattr(obj, m, None)) for m in methods)}
    section = _section(_page("internals.md"), "### coder.py", "### registry.py")
    assert len(coders) >= 12 and _named(coders, section) == []
    assert _named(coders, section.replace("`KLTCoder`", "KLT's coder")) == ["KLTCoder"]


def test_internals_replay_lists_every_member():
    from kvstats.sweep.replay import Replay

    section = _section(_page("internals.md"), "  - `replay.py`:", "  - `store.py`:")
    assert _listed(Replay, section) == []


def test_a_new_member_is_found():
    from kvstats.quant.schemedef import SchemeDef

    section = _section(_page("internals.md"), "### registry.py, schemedef.py", "### register.py")
    assert _listed(SchemeDef, section.replace("coded_dim", "coded_dims")) == sorted(
        _listed(SchemeDef, section) + ["coded_dim"])


def _named(names, text: str) -> list[str]:
    spans = _code_spans(text)
    return sorted(n for n in names if not any(re.search(rf"(?<!\w){n}\b", span) for span in spans))


PACKAGES = ("kvstats", "kvstats.quant", "kvstats.data", "kvstats.metrics", "kvstats.stats",
            "kvstats.analysis", "kvstats.report", "kvstats.models", "kvstats_gpu")


@pytest.mark.parametrize("package", PACKAGES)
def test_internals_names_every_public_name_of_each_package(package):
    """Each name a package offers (its ``__all__``, modules aside) is in internals.md."""
    import importlib

    try:
        module = importlib.import_module(package)
        names = {n for n in module.__all__ if n != "__version__"
                 and not inspect.ismodule(getattr(module, n))}
    except ImportError as err:   # an extra not installed (torch, jax)
        pytest.skip(str(err))
    assert _named(names, _page("internals.md")) == []


def test_internals_names_every_public_function_and_class():
    """Each public function and class a module of kvstats or kvstats_gpu defines is in
    internals.md: a new function, or a module without a section, shows here."""
    import importlib

    missing = []
    for path in sorted(ROOT.glob("kvstats/**/*.py")) + sorted(ROOT.glob("kvstats_gpu/**/*.py")):
        try:
            module = importlib.import_module(_module_name(path))
        except ImportError:   # an extra not installed
            continue
        own = {n for n, obj in vars(module).items() if not n.startswith("_")
               and (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__module__ == module.__name__}
        missing += [f"{module.__name__}.{n}" for n in _named(own, _page("internals.md"))]
    assert missing == []


def test_internals_lists_every_lazy_name_of_kvstats_sweep():
    import kvstats.results
    import kvstats.sweep

    bullet = _section(_page("internals.md"), "- `kvstats.sweep` (a package;", "  - `config.py`:")
    own = {n for n in kvstats.sweep.__all__ if n not in vars(kvstats.results)
           and not inspect.ismodule(getattr(kvstats.sweep, n))}
    assert _named(own, bullet) == []
    assert _named(own, bullet.replace("`check_grid`, ", "")) == ["check_grid"]


def test_internals_registry_lists_are_the_registry_s():
    """The built-ins internals.md lists by flag: those grouping tokens and those that
    export to the GPU path."""
    from kvstats.quant.registry import BUILTIN

    flat = re.sub(r"\s*\n\s*", " ", _section(_page("internals.md"), "### registry.py", "### register.py"))
    grouped = re.search(r"`token_group_param` \(([\w, ]+): `\"group_size\"`\)", flat).group(1)
    gpu = re.search(r"`gpu` \(`Scheme\.export\(\)` supported: ([\w, ]+)\)", flat).group(1)
    assert set(grouped.split(", ")) == {n for n, d in BUILTIN.items() if d.token_group_param}
    assert set(gpu.split(", ")) == {n for n, d in BUILTIN.items() if d.gpu}


# --- counts the pages state -------------------------------------------------------------------

def test_design_counts_the_architectures_the_test_runs():
    design = _page("design.md")
    stated = int(re.search(r"test_cache_architectures\.py runs (\d+) decoder architectures", design).group(1))
    source = (ROOT / "tests" / "models" / "test_cache_architectures.py").read_text(encoding="utf-8")
    read = next(node.value for node in ast.parse(source).body
                if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "READ")
    assert stated == len(read.elts)


def test_design_names_the_only_module_over_its_line_limit():
    """"X.py, the only one over N" (design.md's conventions): no other module has more
    than N lines."""
    name, limit = re.search(r"([\w/]+\.py), the only one over (\d+)", _page("design.md")).groups()
    files = sorted(ROOT.glob("kvstats/**/*.py")) + sorted(ROOT.glob("kvstats_gpu/**/*.py"))
    over = [str(p.relative_to(ROOT)) for p in files
            if len(p.read_text(encoding="utf-8").splitlines()) > int(limit)]
    assert [p.removeprefix("kvstats/").removeprefix("kvstats_gpu/") for p in over] == [name]
