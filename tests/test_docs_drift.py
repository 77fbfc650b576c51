"""docs/design.md and docs/internals.md name what the code has.

Cheap mechanical checks of what the two architecture pages state in a form a test can
read: the files, dotted names, flags and identifiers they give exist; design.md's module
tree lists every module, in test_layering's layer order; internals.md names every public
function, class and package export, every coder and every member of the classes it
describes in full; the counts design.md states are the code's. The quoted signatures,
records and constants are checked in test_docs_drift_quotes.py. Each check has a mutant
page it must catch beside it.
"""
from __future__ import annotations

import ast
import functools
import importlib
import inspect
import re
import warnings
from pathlib import Path

import pytest

from test_layering import FILES, LAYERS, ROOT, _module_name
from test_readme import _resolves

PAGES = ("design.md", "internals.md")


def _page(name: str) -> str:
    return (ROOT / "docs" / name).read_text(encoding="utf-8")


def _code_spans(text: str) -> list[str]:
    """The text of every `...` span (a span may run over a line break)."""
    return re.findall(r"`([^`]+)`", text)


def _section(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def _named(names, text: str) -> list[str]:
    """Those of ``names`` no code span of ``text`` gives (alone or as the end of a dotted name)."""
    spans = _code_spans(text)
    return sorted(n for n in names if not any(re.search(rf"(?<!\w){n}\b", span) for span in spans))


@functools.cache
def loaded_modules() -> tuple:
    """Every module of kvstats and kvstats_gpu, imported (one needing an extra that is not
    installed left out)."""
    modules = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # importing the GPU and model modules may warn
        for path in FILES:
            try:
                modules.append(importlib.import_module(_module_name(path)))
            except ImportError:
                continue
    return tuple(modules)


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
    loaded_modules()   # imported once, quietly
    assert [name for name in dotted_names(_page(page)) if not _resolves(name)] == []


def test_a_renamed_dotted_name_is_found():
    text = "`kvstats.results.check_comparisons` and `kvstats.plugins.relocate_plugin`"
    assert [name for name in dotted_names(text) if not _resolves(name)] == ["kvstats.plugins.relocate_plugin"]


@functools.cache
def _source_words() -> frozenset:
    """Every word of the repository's code, tests and scripts (this file's aside)."""
    return frozenset(re.findall(r"\w+", "\n".join(
        p.read_text(encoding="utf-8") for top in ("kvstats", "kvstats_gpu", "experiments", "tests", "examples")
        for p in sorted((ROOT / top).rglob("*"))
        if p.suffix in (".py", ".sh", ".toml") and p.name != Path(__file__).name)))


#: words of the pages' code spans that name something outside the repository
FOREIGN = {"conv"}   # a transformers layer type (QuantizedCache refuses it)


def unknown_identifiers(text: str) -> list[str]:
    """Identifiers of the page's code spans (each part of a dotted name, three characters
    or more) that are no word of the code: a renamed or removed function, class,
    attribute, parameter or key."""
    words = _source_words() | FOREIGN
    found = {part for span in _code_spans(text)
             for name in re.findall(r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", span)
             for part in name.split(".") if len(part) >= 3}
    return sorted(found - words)


@pytest.mark.parametrize("page", PAGES)
def test_every_identifier_the_page_gives_is_in_the_code(page):
    assert unknown_identifiers(_page(page)) == []


def test_a_renamed_private_name_is_found():
    assert unknown_identifiers("`_take_dir_lock`, `try_lock`, `Rotation._flat(batch)`") == ["_take_dir_lock"]


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
    actual = {_module_name(p) for p in FILES}
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


def test_design_sweep_section_names_every_module_of_the_sweep():
    """design.md's "The sweep" says what each module of kvstats/sweep is for."""
    section = _section(_page("design.md"), "## The sweep", "## Analysis apart from rendering")
    modules = {p.name for p in (ROOT / "kvstats" / "sweep").glob("*.py")} - {"__init__.py"}
    assert _named(modules, section) == []
    assert _named(modules, section.replace("`locks.py`", "the lock module")) == ["locks.py"]


# --- what internals.md names in full -----------------------------------------------------

def _public_members(cls) -> set[str]:
    names = {n for n in getattr(cls, "__dataclass_fields__", {}) if not n.startswith("_")}
    names |= {n for n, m in vars(cls).items() if not n.startswith("_")
              and (inspect.isfunction(m) or isinstance(m, property))}
    return names


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


PACKAGES = ("kvstats", "kvstats.quant", "kvstats.data", "kvstats.metrics", "kvstats.stats",
            "kvstats.analysis", "kvstats.report", "kvstats.models", "kvstats_gpu")


@pytest.mark.parametrize("package", PACKAGES)
def test_internals_names_every_public_name_of_each_package(package):
    """Each name a package offers (its ``__all__``, modules aside) is in internals.md."""
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
    missing = []
    for module in loaded_modules():
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


def split_modules(design: str) -> list[str]:
    """The seams design.md's conventions name ("a/b": a module split from another) that are
    not two modules of one package."""
    seams = re.search(r"today's seams: ([^)]*)\)", re.sub(r"\s*\n\s*", " ", design)).group(1)
    by_stem: dict[str, set] = {}
    for path in FILES:
        by_stem.setdefault(path.stem, set()).add(path.parent)
    missing = []
    for seam in seams.split(", "):
        first, second = seam.split("/")
        if not by_stem.get(first, set()) & by_stem.get(second, set()):
            missing.append(seam)
    return missing


def test_design_seams_are_modules():
    assert split_modules(_page("design.md")) == []
    assert split_modules(_page("design.md").replace("rank/_ks", "rank/_kolmogorov")) == ["rank/_kolmogorov"]


def test_design_names_the_only_module_over_its_line_limit():
    """"X.py, the only one over N" (design.md's conventions): no other module has more
    than N lines."""
    name, limit = re.search(r"([\w/]+\.py), the only one over (\d+)", _page("design.md")).groups()
    over = [str(p.relative_to(ROOT)) for p in FILES
            if len(p.read_text(encoding="utf-8").splitlines()) > int(limit)]
    assert [p.removeprefix("kvstats/").removeprefix("kvstats_gpu/") for p in over] == [name]
