"""Compare our proto/ and thrift/ against the committed wire manifests.

`python -m tests.wire.check [proto|thrift] [--only PREFIX]` prints every
difference (missing, extra or changed entry) and exits non-zero if any.
The same functions back tests/wire/test_wire_manifest.py.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tests.wire import manifest

REPO = Path(__file__).resolve().parents[2]
WIRE = Path(__file__).resolve().parent
PROTO_MANIFEST = WIRE / "peloton_api.json"
THRIFT_MANIFEST = WIRE / "aurora_api.json"
PROTO_PREFIXES = ("peloton/api",)


def diff(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Human-readable list of differences between two JSON values."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out: list[str] = []
        for key in expected:
            if key not in actual:
                out.append(f"missing {path}/{key}")
            else:
                out.extend(diff(expected[key], actual[key], f"{path}/{key}"))
        for key in actual:
            if key not in expected:
                out.append(f"extra {path}/{key}")
        return out
    if expected != actual:
        return [f"changed {path}: expected {expected!r}, got {actual!r}"]
    return []


def ours_proto() -> dict[str, Any]:
    """Manifest of our proto/ tree."""
    root = REPO / "proto"
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*.proto"))
    fds = manifest.compile_descriptor_set(root, files)
    return manifest.proto_manifest(fds, PROTO_PREFIXES)


def ours_thrift() -> dict[str, Any]:
    """Manifest of our thrift/api.thrift."""
    return manifest.thrift_manifest(
        manifest._load_thrift(str(REPO / "thrift" / "api.thrift"), "ours_check"))


def restrict(doc: dict[str, Any], prefix: str) -> dict[str, Any]:
    """Keep only top-level entries whose name starts with `prefix`."""
    return {section: {k: v for k, v in entries.items() if k.startswith(prefix)}
            if isinstance(entries, dict) else entries
            for section, entries in doc.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["proto", "thrift"])
    parser.add_argument("--only", default="", help="compare only names with this prefix")
    args = parser.parse_args(argv)
    if args.kind == "proto":
        expected, actual = json.loads(PROTO_MANIFEST.read_text()), ours_proto()
    else:
        expected, actual = json.loads(THRIFT_MANIFEST.read_text()), ours_thrift()
    if args.only:
        expected, actual = restrict(expected, args.only), restrict(actual, args.only)
    problems = diff(expected, actual)
    for line in problems:
        print(line)
    print(f"{len(problems)} difference(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
