"""Every public class, function, method and property of kvstats.models has a numpydoc
docstring with a runnable Examples section (tests/test_docstrings.py runs them).

Methods inherited from transformers (``QuantizedCache``'s ``Cache`` base) are theirs to
document; those of kvstats' own bases (``_CacheMemory``, ``_Side``) count as the class's.
"""

import importlib
import inspect
import pkgutil

import pytest

import kvstats.models


def _public_members():
    names = [kvstats.models.__name__] + [m.name for m in pkgutil.walk_packages(
        kvstats.models.__path__, kvstats.models.__name__ + ".")]
    for module_name in names:
        module = importlib.import_module(module_name)
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module_name:
                continue
            if inspect.isfunction(obj):
                yield f"{module_name}.{name}", obj
            elif inspect.isclass(obj):
                yield f"{module_name}.{name}", obj
                for klass in obj.__mro__:
                    if not klass.__module__.startswith("kvstats.models"):
                        continue
                    for attr, member in vars(klass).items():
                        member = member.fget if isinstance(member, property) else member
                        if not attr.startswith("_") and inspect.isfunction(member):
                            yield f"{module_name}.{name}.{attr}", member


MEMBERS = dict(_public_members())


def test_the_walk_finds_the_members_named_in_the_brief():
    # a walk that found nothing would pass every case below
    for name in ("code_attention.SideCoder.rotate", "growing_buffer.GrowingBuffer.capacity",
                 "group_codes.KIVIKeySide.view", "lut_kernel.LUTKernel.encode",
                 "cache.QuantizedCache.get_conv_state", "cache.QuantizedCache.memory_report",
                 "retrieval.McNemarResult"):
        assert f"kvstats.models.{name}" in MEMBERS
    assert len(MEMBERS) > 80


@pytest.mark.parametrize("name", sorted(MEMBERS))
def test_public_member_has_a_docstring_with_examples(name):
    doc = inspect.cleandoc(MEMBERS[name].__doc__ or "")  # its own (getdoc would take a base's)
    assert doc.strip(), f"{name} has no docstring"
    assert "Examples\n--------\n" in doc and ">>> " in doc.split("Examples\n--------\n", 1)[1], (
        f"{name} has no Examples section with a doctest")
