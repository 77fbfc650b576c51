"""docs/design.md's import rule ("Layers and data flow"), read from the source.

At load (a module's top-level imports, outside ``if TYPE_CHECKING:``) a module imports only
from its own layer or a layer above it in ``LAYERS``; the four imports design.md names go
the other way, and only inside a function. The plugin modules stand beside the layers: at
load ``kvstats.plugins`` imports only ``kvstats.user_imports``. Outside kvstats.models and
kvstats_gpu no module imports torch, jax or transformers at load, and the modules the
tree marks "stdlib only" (the parser of ``kvstats --help`` among them) import the standard
library only.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: design.md's order, top (imported by everything) to bottom; a module belongs to the last
#: entry that is it or a package holding it
LAYERS = ("kvstats", "kvstats._lazy", "kvstats._checks", "kvstats._scaling", "kvstats.qjl_theory",
          "kvstats.quant",
          "kvstats.rate_distortion", "kvstats.theory", "kvstats.data", "kvstats.metrics",
          "kvstats.stats", "kvstats.results", "kvstats.sweep", "kvstats.analysis", "kvstats.report",
          "kvstats.cli", "kvstats.models", "kvstats_gpu")
SAME_LAYER = {"kvstats._lazy": "kvstats", "kvstats.cli_parser": "kvstats.cli",
              "kvstats._cli_output": "kvstats.cli"}
BESIDE = {"kvstats.plugins", "kvstats.user_imports", "kvstats.plugin_relocation"}
#: (importer, imported): upward, allowed inside a function only (design.md says why)
CALL_TIME_UPWARD = {("kvstats.quant.schemedef", "kvstats.theory"),
                    ("kvstats.data.synthetic", "kvstats.metrics.attention"),
                    ("kvstats.sweep.config", "kvstats.report.options"),
                    ("kvstats.results", "kvstats.sweep.config")}


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


FILES = sorted(ROOT.glob("kvstats/**/*.py")) + sorted(ROOT.glob("kvstats_gpu/**/*.py"))
MODULES = {_module_name(p) for p in FILES}


def _layer(module: str) -> int:
    module = SAME_LAYER.get(module, module)
    return max(i for i, name in enumerate(LAYERS) if module == name or module.startswith(name + "."))


def _imported(module: str, node: ast.Import | ast.ImportFrom, is_package: bool):
    """The project modules an import statement loads (the longest known prefix of each name)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:   # relative: from the module's package, up level - 1 packages
            package = module.split(".") if is_package else module.split(".")[:-1]
            base = ".".join(package[:len(package) - node.level + 1] + [node.module or ""]).rstrip(".")
        else:
            base = node.module or ""
        names = [f"{base}.{alias.name}" for alias in node.names]
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name:
            yield name


def _imports(tree: ast.AST):
    """(import node, at load?) for every import outside ``if TYPE_CHECKING:`` blocks."""
    def walk(node, at_load):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, at_load
            in_function = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            yield from walk(child, at_load and not in_function)
    return walk(tree, True)


def layering_violations(files=FILES, root: Path = ROOT) -> list[str]:
    bad = []
    for path in files:
        module = _module_name(path, root)
        for node, at_load in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _imported(module, node, path.name == "__init__.py"):
                if target in (module, "kvstats"):
                    continue
                if module in BESIDE or target in BESIDE:
                    if at_load and module == "kvstats.plugins" and target != "kvstats.user_imports":
                        bad.append(f"{path.name}:{node.lineno}: plugins imports {target} at load")
                    continue
                if _layer(target) <= _layer(module):
                    continue
                if not at_load and (module, target) in CALL_TIME_UPWARD:
                    continue
                bad.append(f"{module}:{node.lineno} imports {target} "
                           f"({'at load' if at_load else 'when called'})")
    return bad


def test_imports_follow_the_layers_of_design_md():
    assert layering_violations() == []


#: design.md: "Nothing in the numpy core imports torch or jax at load"
ACCELERATOR_LIBRARIES = {"torch", "jax", "jaxlib", "transformers"}


def accelerator_imports(files=FILES, root: Path = ROOT) -> list[str]:
    """Imports of torch, jax or transformers at load in a module outside kvstats.models
    and kvstats_gpu (TYPE_CHECKING blocks and function bodies aside)."""
    bad = []
    for path in files:
        module = _module_name(path, root)
        if module.startswith(("kvstats.models", "kvstats_gpu")):
            continue
        for node, at_load in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if not node.level else [])
            if at_load and any(n.split(".")[0] in ACCELERATOR_LIBRARIES for n in names):
                bad.append(f"{module}:{node.lineno}")
    return bad


def test_the_numpy_core_imports_no_accelerator_library_at_load(tmp_path):
    assert accelerator_imports() == []
    copy = tmp_path / "kvstats" / "metrics" / "geometry.py"
    copy.parent.mkdir(parents=True)
    source = (ROOT / "kvstats" / "metrics" / "geometry.py").read_text(encoding="utf-8")
    copy.write_text(source + "\nimport torch.nn\ndef f():\n    import jax\n", encoding="utf-8")
    assert [b.split(":")[0] for b in accelerator_imports([copy], root=tmp_path)] == ["kvstats.metrics.geometry"]


#: the modules design.md's tree says import the standard library only (the command's parser
#: and its catalogs, so `kvstats --help` imports no numpy; the output helpers; the lock)
STDLIB_ONLY = {"kvstats.cli_parser", "kvstats._cli_output", "kvstats.quant.catalog", "kvstats.data.catalog",
               "kvstats.stats.catalog", "kvstats.sweep.locks"}


def non_stdlib_imports(files=FILES, root: Path = ROOT) -> list[str]:
    """At-load imports of a STDLIB_ONLY module that are neither the standard library nor
    another STDLIB_ONLY module."""
    import sys

    bad = []
    for path in files:
        module = _module_name(path, root)
        if module not in STDLIB_ONLY:
            continue
        for node, at_load in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            for target in ([a.name for a in node.names] if isinstance(node, ast.Import)
                           else [f"{node.module}.{a.name}" for a in node.names] if not node.level else ["."]):
                # a name of a module (from kvstats.quant import catalog) or from one
                ours = any(target == m or target.startswith(m + ".") for m in STDLIB_ONLY)
                if at_load and not ours and target.split(".")[0] not in sys.stdlib_module_names | {"__future__"}:
                    bad.append(f"{module}:{node.lineno} imports {target}")
    return bad


def test_the_stdlib_only_modules_import_the_standard_library_only(tmp_path):
    assert non_stdlib_imports() == []
    copy = tmp_path / "kvstats" / "stats" / "catalog.py"
    copy.parent.mkdir(parents=True)
    copy.write_text((ROOT / "kvstats" / "stats" / "catalog.py").read_text(encoding="utf-8")
                    + "\nimport numpy as np\n", encoding="utf-8")
    assert non_stdlib_imports([copy], root=tmp_path) == ["kvstats.stats.catalog:%d imports numpy"
                                                         % len(copy.read_text().splitlines())]


@pytest.mark.parametrize("importer, line, expected", [
    ("quant/packing.py", "from kvstats.models import cache", "kvstats.quant.packing"),
    ("analysis/summary.py", "from kvstats.report import plots", "kvstats.analysis.summary"),
    ("stats/rank.py", "def f():\n    from ..sweep import run", "kvstats.stats.rank"),  # call time, relative
])
def test_an_upward_import_is_found(tmp_path, importer, line, expected):
    source = ROOT / "kvstats" / importer
    copy = tmp_path / "kvstats" / importer
    copy.parent.mkdir(parents=True)
    copy.write_text(source.read_text(encoding="utf-8") + "\n" + line + "\n", encoding="utf-8")
    found = layering_violations([copy], root=tmp_path)
    assert len(found) == 1 and found[0].startswith(expected)


def test_design_md_names_the_call_time_exceptions():
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    for importer, imported in CALL_TIME_UPWARD:
        assert imported.replace("kvstats.", "").replace(".", "/") in design, imported
