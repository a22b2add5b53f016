"""Generate the protobuf/gRPC Python modules into peloton/api/gen/.

Our .proto files import each other by their wire package paths
(`peloton/api/v0/...`, `mesos/v1/...`), so protoc emits imports such as
`from peloton.api.v0 import peloton_pb2`.  Those would collide with our own
`peloton` package, so the generated tree lives under `peloton.api.gen` and
its imports are rewritten to that prefix.  Only Python import paths change;
descriptor full names, and therefore the wire, stay exactly as declared.

Run by `make gen`; the output is not committed.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROTO = REPO / "proto"
OUT = REPO / "peloton" / "api" / "gen"
# Top-level proto package roots whose generated modules move under OUT.
ROOTS = ("peloton", "mesos", "pelotonpy")
_IMPORT = re.compile(r"^(from|import) (" + "|".join(ROOTS) + r")([.\w]*)", re.MULTILINE)


def rewrite(text: str) -> str:
    """Point generated imports of our proto packages at peloton.api.gen."""
    return _IMPORT.sub(lambda m: f"{m.group(1)} peloton.api.gen.{m.group(2)}{m.group(3)}", text)


def main() -> int:
    import grpc_tools
    from grpc_tools import protoc

    files = sorted(str(p.relative_to(PROTO)) for p in PROTO.rglob("*.proto"))
    if not files:
        print("no .proto files under proto/", file=sys.stderr)
        return 1
    tmp = OUT.with_name("gen.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    args = ["protoc", f"-I{PROTO}", f"-I{include}", f"--python_out={tmp}",
            f"--pyi_out={tmp}", f"--grpc_python_out={tmp}", *files]
    if protoc.main(args) != 0:
        print("protoc failed", file=sys.stderr)
        return 1
    for path in tmp.rglob("*.py*"):
        path.write_text(rewrite(path.read_text()))
    for directory in [tmp, *[d for d in tmp.rglob("*") if d.is_dir()]]:
        (directory / "__init__.py").touch()
    (tmp / "py.typed").touch()
    shutil.rmtree(OUT, ignore_errors=True)
    tmp.rename(OUT)
    print(f"generated {len(files)} proto files into {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
