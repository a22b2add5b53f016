"""Wire manifests: the facts a client depends on, extracted from IDL.

A manifest is a plain JSON document listing, for the gRPC API, every
service method (request/response types, streaming flags), every message
field (name, number, type, label, referenced type, packing, default) and
every enum value; and for the Thrift API every struct/union/exception
field (id, name, type, requiredness), enum value, constant name and
service method with its argument ids.  Comments, option text, file
layout and declaration order are deliberately absent: they do not reach
the wire.

The committed manifests were produced from the originals (uber/peloton's
protobuf/ tree, apache/aurora's api.thrift plus the legacy TaskConfig
fields of Peloton's copy) with this module's command line; the test in
tests/wire compares them with what our own proto/ and thrift/ produce.

Usage (regenerating from a checkout of the originals, outside the repo):

    python -m tests.wire.manifest proto --root /path/to/protobuf \\
        --prefix peloton/api --out tests/wire/peloton_api.json
    python -m tests.wire.manifest thrift --idl aurora.thrift \\
        --legacy peloton.thrift --out tests/wire/aurora_api.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

# descriptor_pb2 enum numbers -> readable names, so the manifest is legible.
_PROTO_TYPES = {
    1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32",
    6: "fixed64", 7: "fixed32", 8: "bool", 9: "string", 10: "group",
    11: "message", 12: "bytes", 13: "uint32", 14: "enum", 15: "sfixed32",
    16: "sfixed64", 17: "sint32", 18: "sint64",
}
_PROTO_LABELS = {1: "optional", 2: "required", 3: "repeated"}
_PACKABLE = {t for t in _PROTO_TYPES if t not in (9, 10, 11, 12)}


def compile_descriptor_set(root: Path, files: list[str]) -> Any:
    """Compile `files` (relative to `root`) into a FileDescriptorSet."""
    import tempfile

    import grpc_tools
    from google.protobuf import descriptor_pb2
    from grpc_tools import protoc

    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "set.pb")
        args = ["protoc", f"-I{root}", f"-I{include}",
                f"--descriptor_set_out={out}", "--include_imports", *files]
        if protoc.main(args) != 0:
            raise SystemExit(f"protoc failed on {root}")
        fds = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as fh:
            fds.ParseFromString(fh.read())
    return fds


def _field_entry(fld: Any, syntax: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "number": fld.number,
        "type": _PROTO_TYPES[fld.type],
        "label": _PROTO_LABELS[fld.label],
    }
    if fld.type_name:
        entry["type_name"] = fld.type_name.lstrip(".")
    if fld.label == 3 and fld.type in _PACKABLE:
        # Packed encoding is the proto3 default and opt-in for proto2.
        if fld.options.HasField("packed"):
            entry["packed"] = fld.options.packed
        else:
            entry["packed"] = syntax == "proto3"
    if fld.HasField("default_value"):
        entry["default"] = fld.default_value
    if fld.HasField("oneof_index") and not fld.proto3_optional:
        entry["oneof"] = True
    if fld.proto3_optional:
        entry["proto3_optional"] = True
    return entry


def proto_manifest(fds: Any, prefixes: tuple[str, ...], closure: bool = True) -> dict[str, Any]:
    """Build the manifest of every file under `prefixes` and, with `closure`,
    of every message/enum those files reference (transitively)."""
    messages: dict[str, tuple[Any, str]] = {}
    enums: dict[str, Any] = {}
    services: dict[str, Any] = {}

    def walk(prefix: str, msg: Any, syntax: str) -> None:
        full = f"{prefix}.{msg.name}"
        messages[full] = (msg, syntax)
        for nested in msg.nested_type:
            walk(full, nested, syntax)
        for enum in msg.enum_type:
            enums[f"{full}.{enum.name}"] = enum

    roots: set[str] = set()
    root_enums: set[str] = set()
    for f in fds.file:
        syntax = f.syntax or "proto2"
        in_scope = f.name.startswith(prefixes)
        before_m, before_e = set(messages), set(enums)
        for msg in f.message_type:
            walk(f.package, msg, syntax)
        for enum in f.enum_type:
            enums[f"{f.package}.{enum.name}"] = enum
        if in_scope:
            roots |= set(messages) - before_m
            root_enums |= set(enums) - before_e
            for svc in f.service:
                services[f"{f.package}.{svc.name}"] = {
                    m.name: {
                        "input": m.input_type.lstrip("."),
                        "output": m.output_type.lstrip("."),
                        "client_streaming": m.client_streaming,
                        "server_streaming": m.server_streaming,
                    }
                    for m in svc.method
                }
                for m in svc.method:
                    roots.add(m.input_type.lstrip("."))
                    roots.add(m.output_type.lstrip("."))

    keep_m: set[str] = set()
    keep_e: set[str] = set(root_enums)
    stack = list(roots)
    while stack:
        name = stack.pop()
        if name in keep_m or name not in messages:
            continue
        keep_m.add(name)
        if not closure:
            continue
        msg, _ = messages[name]
        for fld in msg.field:
            ref = fld.type_name.lstrip(".")
            if fld.type == 14:
                keep_e.add(ref)
            elif ref:
                stack.append(ref)
        for nested in msg.nested_type:
            stack.append(f"{name}.{nested.name}")

    out_messages: dict[str, Any] = {}
    for name in sorted(keep_m):
        msg, syntax = messages[name]
        out_messages[name] = {
            "syntax": syntax,
            "fields": {fld.name: _field_entry(fld, syntax) for fld in msg.field},
        }
        if msg.options.map_entry:
            out_messages[name]["map_entry"] = True
    out_enums = {
        name: {v.name: v.number for v in enums[name].value} for name in sorted(keep_e)
    }
    return {"services": dict(sorted(services.items())),
            "messages": out_messages, "enums": out_enums}


# ---- Thrift -----------------------------------------------------------------

def _thrift_type(spec: Any) -> Any:
    """Render a thriftpy2 type spec as a JSON-able description."""
    from thriftpy2.thrift import TType

    names = {v: k.lower() for k, v in TType.__dict__.items()
             if k.isupper() and isinstance(v, int)}
    if isinstance(spec, int):
        return names[spec]
    ttype, inner = spec
    if ttype in (TType.STRUCT,):
        return {"struct": inner.__name__}
    if ttype == TType.I32 and hasattr(inner, "_VALUES_TO_NAMES"):
        return {"enum": inner.__name__}
    if ttype in (TType.LIST, TType.SET):
        return {names[ttype]: _thrift_type(inner)}
    if ttype == TType.MAP:
        return {"map": [_thrift_type(inner[0]), _thrift_type(inner[1])]}
    return names[ttype]


def _thrift_fields(cls: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fid, spec in sorted(cls.thrift_spec.items()):
        ttype, name = spec[0], spec[1]
        required = spec[-1] if isinstance(spec[-1], bool) else False
        tdesc = _thrift_type(ttype) if len(spec) == 3 else _thrift_type((ttype, spec[2]))
        out[str(fid)] = {"name": name, "type": tdesc, "required": required}
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, (set, frozenset, list, tuple)):
        return sorted(_jsonable(v) for v in value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(type(value).__name__)


def thrift_manifest(module: Any) -> dict[str, Any]:
    """Manifest of a module returned by `thriftpy2.load`."""
    meta = module.__thrift_meta__
    unions = {cls.__name__ for cls in meta["unions"]}
    structs: dict[str, Any] = {}
    for cls in [*meta["structs"], *meta["unions"]]:
        entry: dict[str, Any] = {"fields": _thrift_fields(cls)}
        if cls.__name__ in unions:
            entry["union"] = True
        structs[cls.__name__] = entry
    enums = {cls.__name__: {v: k for k, v in sorted(cls._VALUES_TO_NAMES.items())}
             for cls in meta["enums"]}
    services: dict[str, Any] = {}
    for svc in meta["services"]:
        own = [m for m in svc.thrift_services
               if not any(m in getattr(base, "thrift_services", ()) for base in svc.__mro__[1:])]
        services[svc.__name__] = {
            "extends": next((b.__name__ for b in svc.__mro__[1:] if hasattr(b, "thrift_services")), None),
            "methods": {m: {"args": _thrift_fields(getattr(svc, f"{m}_args")),
                            "result": _thrift_fields(getattr(svc, f"{m}_result"))}
                        for m in sorted(own)},
        }
    consts = {n: _jsonable(getattr(module, n)) for n in sorted(dir(module))
              if n.isupper() and not n.startswith("_")}
    return {"structs": dict(sorted(structs.items())), "enums": dict(sorted(enums.items())),
            "services": dict(sorted(services.items())), "constants": consts}


def merge_legacy(base: dict[str, Any], legacy: dict[str, Any], only: dict[str, list[int]]) -> None:
    """Add the listed legacy field ids of `legacy` structs into `base`."""
    for struct, ids in only.items():
        for fid in ids:
            base["structs"][struct]["fields"][str(fid)] = legacy["structs"][struct]["fields"][str(fid)]
        base["structs"][struct]["fields"] = dict(
            sorted(base["structs"][struct]["fields"].items(), key=lambda kv: int(kv[0])))


# Fields that exist only in Peloton's copy of api.thrift and that Aurora
# clients of that lineage still send.
LEGACY_THRIFT_FIELDS = {"TaskConfig": [8, 9, 10, 21], "ResourceAggregate": [1, 2, 3]}


def _load_thrift(path: str, name: str) -> Any:
    import thriftpy2

    return thriftpy2.load(path, module_name=f"{name}_thrift")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("proto")
    p.add_argument("--root", required=True, type=Path)
    p.add_argument("--prefix", action="append", required=True)
    p.add_argument("--out", required=True, type=Path)
    t = sub.add_parser("thrift")
    t.add_argument("--idl", required=True)
    t.add_argument("--legacy")
    t.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    if args.cmd == "proto":
        files = sorted(
            str(p.relative_to(args.root)) for p in args.root.rglob("*.proto")
            if str(p.relative_to(args.root)).startswith(tuple(args.prefix))
        )
        manifest = proto_manifest(compile_descriptor_set(args.root, files), tuple(args.prefix))
    else:
        manifest = thrift_manifest(_load_thrift(args.idl, "manifest_base"))
        if args.legacy:
            merge_legacy(manifest, thrift_manifest(_load_thrift(args.legacy, "manifest_legacy")),
                         LEGACY_THRIFT_FIELDS)
    args.out.write_text(json.dumps(manifest, indent=1, sort_keys=False) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
