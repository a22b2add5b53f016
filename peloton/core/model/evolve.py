"""`evolve`: `dataclasses.replace` for the frozen, slotted values on the hot path, 4x faster.

`dataclasses.replace` walks `fields()` on every call and then runs the frozen
`__init__`, which sets each field through `object.__setattr__`: about 6 µs for a
21-field `TaskRuntime`, and every task state change makes several.  `evolve`
compiles one function per class on first use that builds the copy with
`object.__new__` and sets every slot through its member descriptor (what a
frozen `__init__` ends up doing, minus the generic machinery): about 1.4 µs.

`constructor(cls)` is the same for new values: a function taking the fields as the
class's `__init__` does (defaults included) that builds the value that way.
`evolver(cls)` is the compiled copy function itself, for a caller that copies one
class by the hundred thousand (the `evolve` call around it packs the keywords twice);
`replacer(cls, name)` copies with one field replaced, passed positionally: what a store
does to stamp the new revision on every runtime it writes.  It builds the copy as an
instance of a plain "twin" class with the same slots, whose attribute stores the
interpreter specializes, and then assigns `__class__` (CPython allows that only between
identical layouts, and checks it): about 0.35 µs for `TaskRuntime` against 1.1 µs
through the member descriptors.

Same contract as `dataclasses.replace` for the classes it accepts: every field
must be an init field (no `field(init=False)`), an unknown keyword raises
TypeError.  A class with `__post_init__` (validation, derived fields) or without
`__slots__` goes through its constructor instead, so nothing is skipped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_EVOLVERS: dict[type, Callable[..., Any]] = {}
_CONSTRUCTORS: dict[type, Callable[..., Any]] = {}
_REPLACERS: dict[tuple[type, str], Callable[[Any, Any], Any]] = {}
_KEEP = object()  # "not given": the field keeps the original's value


def evolve(obj: T, /, **changes: Any) -> T:
    """A copy of the dataclass instance `obj` with `changes` applied (see the module doc)."""
    fn = _EVOLVERS.get(type(obj))
    if fn is None:
        fn = _EVOLVERS[type(obj)] = _compile(type(obj))
    result: T = fn(obj, **changes)
    return result


def evolver(cls: type[T]) -> Callable[..., T]:
    """The function `evolve` calls for `cls` instances: `evolver(cls)(obj, **changes)` is
    `evolve(obj, **changes)` for an `obj` of exactly that class."""
    fn = _EVOLVERS.get(cls)
    if fn is None:
        fn = _EVOLVERS[cls] = _compile(cls)
    return fn


def replacer(cls: type[T], name: str) -> Callable[[T, Any], T]:
    """A function `(obj, value)` returning `evolve(obj, **{name: value})` for an `obj` of
    exactly `cls`, compiled for that one field (no keyword handling per call).  TypeError
    if `cls` has no such field."""
    key = (cls, name)
    fn = _REPLACERS.get(key)
    if fn is None:
        fn = _REPLACERS[key] = _compile_replacer(cls, name)
    return fn


def constructor(cls: type[T]) -> Callable[..., T]:
    """A function building `cls` from keyword (or positional) fields like `cls(...)`, the
    same way `evolve` copies: for values made by the hundred thousand (pod events)."""
    fn = _CONSTRUCTORS.get(cls)
    if fn is None:
        fn = _CONSTRUCTORS[cls] = _compile_constructor(cls)
    return fn


def _compile_constructor(cls: type) -> Callable[..., Any]:
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"constructor: {cls.__name__} is not a dataclass")
    fields = dataclasses.fields(cls)
    if ("__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__")
            or not all(f.init and not f.kw_only and f.name.isidentifier() for f in fields)):
        return cls  # the class's own constructor does what it must
    env: dict[str, Any] = {"cls": cls, "new": object.__new__, "K": _KEEP}
    params, body = [], ["    n = new(cls)"]
    for i, f in enumerate(fields):
        if f.default is not dataclasses.MISSING:
            env[f"d{i}"] = f.default
            params.append(f"{f.name}=d{i}")
            value = f.name
        elif f.default_factory is not dataclasses.MISSING:
            env[f"f{i}"] = f.default_factory
            params.append(f"{f.name}=K")
            value = f"f{i}() if {f.name} is K else {f.name}"
        else:
            params.append(f.name)
            value = f.name
        env[f"s{i}"] = cls.__dict__[f.name].__set__
        body.append(f"    s{i}(n, {value})")
    body.append("    return n")
    source = f"def new_{cls.__name__}({', '.join(params)}):\n" + "\n".join(body) + "\n"
    exec(source, env)  # generated from the class's field names only, never from data
    fn: Callable[..., Any] = env[f"new_{cls.__name__}"]
    return fn


def _compile(cls: type) -> Callable[..., Any]:
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"evolve: {cls.__name__} is not a dataclass")
    fields = dataclasses.fields(cls)
    names = [f.name for f in fields]
    if not all(f.init for f in fields) or not all(n.isidentifier() for n in names):
        raise TypeError(f"evolve: {cls.__name__} has fields evolve cannot copy")
    params = ", ".join(f"{n}=K" for n in names)
    values = [f"o.{n} if {n} is K else {n}" for n in names]
    env: dict[str, Any] = {"K": _KEEP, "cls": cls, "new": object.__new__}
    slotted = "__slots__" in cls.__dict__ and not hasattr(cls, "__post_init__")
    if slotted:
        # Member descriptors set a slot directly; the class's frozen __setattr__ is bypassed
        # exactly as its generated __init__ bypasses it.
        body = ["    n = new(cls)"]
        for i, (name, value) in enumerate(zip(names, values, strict=True)):
            env[f"s{i}"] = cls.__dict__[name].__set__
            body.append(f"    s{i}(n, {value})")
        body.append("    return n")
    else:
        body = ["    return cls(" + ", ".join(values) + ")"]
    source = f"def evolve_{cls.__name__}(o, /, {params}):\n" + "\n".join(body) + "\n"
    exec(source, env)  # generated from the class's field names only, never from data
    fn: Callable[..., Any] = env[f"evolve_{cls.__name__}"]
    return fn


def _compile_replacer(cls: type, name: str) -> Callable[[Any, Any], Any]:
    copy: Callable[..., Any] = evolver(cls)  # checks that evolve can copy the class at all
    names = [f.name for f in dataclasses.fields(cls)]
    if name not in names:
        raise TypeError(f"replacer: {cls.__name__} has no field {name!r}")
    if "__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__"):
        return lambda obj, value: copy(obj, **{name: value})  # through the constructor
    twin = _layout_twin(cls)
    env: dict[str, Any] = {"cls": cls, "twin": twin, "new": object.__new__}
    if twin is not None:
        # Plain attribute stores on the twin (slot stores the interpreter specializes),
        # then the copy becomes a `cls`: a third of the member-descriptor calls' cost.
        body = ["    n = new(twin)"]
        body += [f"    n.{field} = {'v' if field == name else 'o.' + field}" for field in names]
        body.append("    n.__class__ = cls")
    else:
        body = ["    n = new(cls)"]
        for i, field in enumerate(names):
            env[f"s{i}"] = cls.__dict__[field].__set__
            body.append(f"    s{i}(n, {'v' if field == name else 'o.' + field})")
    body.append("    return n")
    source = f"def replace_{cls.__name__}_{name}(o, v):\n" + "\n".join(body) + "\n"
    exec(source, env)  # generated from the class's field names only, never from data
    fn: Callable[[Any, Any], Any] = env[f"replace_{cls.__name__}_{name}"]
    return fn


def _layout_twin(cls: type) -> type | None:
    """A plain class with exactly the slots of `cls`, so that an instance of it may become
    a `cls` by `__class__` assignment (CPython allows that only between identical
    layouts); None for a class with a base class or whose layout the check refuses."""
    slots = cls.__dict__.get("__slots__")
    if cls.__bases__ != (object,) or not isinstance(slots, tuple):
        return None
    twin = type(f"{cls.__name__}Twin", (), {"__slots__": slots})
    probe: Any = object.__new__(twin)
    try:
        probe.__class__ = cls  # the interpreter's own layout check
    except TypeError:
        return None
    return twin
