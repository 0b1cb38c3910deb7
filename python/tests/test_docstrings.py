"""Every public class, method, property and function of wbkit says what it is:
help(wbkit.Cache) and friends are the module's reference. pybind11 writes a
signature line into every function's docstring by itself, so only the text
after it counts; a property without a doc has an empty one."""

import enum
import inspect
import pydoc
import re

import pytest

import wbkit
import wbkit.testing
from wbkit import _wbkit

# The protocol methods say what they do by their name.
PROTOCOL = {"__iter__", "__next__", "__len__", "__getitem__", "__enter__", "__exit__", "__repr__", "__str__",
            "__eq__", "__hash__", "__ne__", "__bool__", "__contains__"}


def prose(doc, name):
    """The docstring without the signature lines pybind11 adds ("name(self: ...) -> ...")."""
    lines = []
    for line in (doc or "").splitlines():
        if re.match(rf"\s*(\d+\. )?{re.escape(name)}\(", line) or line.strip() == "Overloaded function.":
            continue
        lines.append(line)
    return "\n".join(lines).strip()


def members(cls):
    """(name, kind, docstring) of what a class defines itself, public and __init__."""
    for name, attr in vars(cls).items():
        if name.startswith("_") and name != "__init__":
            continue
        if name in PROTOCOL:
            continue
        if isinstance(cls, enum.EnumMeta) and name in cls.__members__:
            continue
        if isinstance(attr, property):
            yield name, "property", (attr.__doc__ or "").strip()
        elif isinstance(attr, (staticmethod, classmethod)):
            yield name, "method", prose(attr.__func__.__doc__, name)
        elif callable(attr):
            yield name, "method", prose(getattr(attr, "__doc__", None), name)


def undocumented(cls):
    """What a class lacks: its own doc, and each member without one."""
    missing = []
    if not (vars(cls).get("__doc__") or "").strip():
        missing.append(f"{cls.__qualname__} (class)")
    for name, kind, doc in members(cls):
        if not doc:
            missing.append(f"{cls.__qualname__}.{name} ({kind})")
    return missing


def public_classes():
    """Every class a script can meet: those the packages export, and the
    extension's others (iterators and views are public as results)."""
    found = {}
    for module in (wbkit, wbkit.testing, _wbkit, _wbkit.testing):
        names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
        for name in names:
            obj = getattr(module, name)
            if inspect.isclass(obj):
                found[obj] = f"{obj.__module__}.{obj.__qualname__}"
    return sorted(found.items(), key=lambda item: item[1])


def public_functions():
    for module in (wbkit, wbkit.testing):
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if callable(obj) and not inspect.isclass(obj):
                yield f"{module.__name__}.{name}", obj


CLASSES = public_classes()


def test_the_walk_sees_the_whole_module():
    names = {qualname.rsplit(".", 1)[1] for _, qualname in CLASSES}
    # The exported classes, the iterators only reachable as results, the test writer.
    assert {"Cache", "LogScan", "ReplayPlan", "Geometry", "Finding", "SlotState", "FindingCode", "Error"} <= names
    assert {"SegmentIterator", "MetablockIterator", "ExtentIterator", "SectorIndexIterator", "LogWriter"} <= names
    properties = sum(kind == "property" for cls, _ in CLASSES for _, kind, _ in members(cls))
    methods = sum(kind == "method" for cls, _ in CLASSES for _, kind, _ in members(cls))
    assert properties > 100 and methods > 20, (properties, methods)


@pytest.mark.parametrize("cls", [cls for cls, _ in CLASSES], ids=[qualname for _, qualname in CLASSES])
def test_class_and_every_method_and_property_have_a_docstring(cls):
    assert undocumented(cls) == []


@pytest.mark.parametrize("name,function", list(public_functions()), ids=[n for n, _ in public_functions()])
def test_every_function_has_a_docstring(name, function):
    assert prose(function.__doc__, function.__name__), name


def test_the_check_finds_what_is_missing():
    class Undocumented:
        def method(self):
            pass

        @property
        def value(self):
            return 1

        @staticmethod
        def make():
            pass

    class Documented:
        """A class."""

        def method(self):
            """A method."""

        @property
        def value(self):
            """A property."""
            return 1

    assert undocumented(Undocumented) == ["test_the_check_finds_what_is_missing.<locals>.Undocumented (class)",
                                          "test_the_check_finds_what_is_missing.<locals>.Undocumented.method (method)",
                                          "test_the_check_finds_what_is_missing.<locals>.Undocumented.value (property)",
                                          "test_the_check_finds_what_is_missing.<locals>.Undocumented.make (method)"]
    assert undocumented(Documented) == []
    # pybind11's own signature line is not documentation.
    assert prose("slot(self: wbkit._wbkit.Cache, k: int) -> wbkit._wbkit.Segment\n", "slot") == ""
    assert prose("slot(self: wbkit._wbkit.Cache, k: int) -> wbkit._wbkit.Segment\n\nThe Segment in slot k.\n",
                 "slot") == "The Segment in slot k."
    assert prose("f(*args, **kwargs)\nOverloaded function.\n\n1. f(self: X) -> int\n\n2. f(self: X, a: int) -> int\n",
                 "f") == ""


def test_help_of_cache_shows_what_each_member_does():
    text = pydoc.render_doc(wbkit.Cache, renderer=pydoc.plaintext)
    for name, _, doc in members(wbkit.Cache):
        first_line = doc.splitlines()[0]
        assert first_line in text, (name, first_line)
    assert "Made by wbkit.open()" in text
