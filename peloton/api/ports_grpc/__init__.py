"""The ports between the daemons (peloton/core/ports.py) over gRPC.

`peloton up` wires the daemon objects to each other directly; separate
processes (`peloton resmgr`, `peloton hostmgr`, ...) talk through these
adapters instead, over the private services in proto/pelotonpy/internal/:

* `channel` — calling a peer's leader: where it is (fixed addresses or a
  ZooKeeper leader znode), retrying UNAVAILABLE with backoff within the
  call's deadline, errors back into the core error tree, and the peer's
  term (a new one means it restarted with empty state);
* `resmgr_client`, `hostmgr_client` — ResourceManagerPort and
  HostManagerPort (with the status stream) as gRPC clients;
* `resmgr_servicer`, `hostmgr_servicer` — the other end: serve a daemon
  object (anything implementing the port) on a GrpcServer;
* `leader_gate` — serve a daemon's APIs only while it leads, answering
  UNAVAILABLE "call to non-leader node" otherwise.

Both wirings pass the same tests: the resource manager, host manager and
placement unit suites run `direct` and `grpc` (tests/harness/ports_wire.py);
tests/integration/test_ports_grpc.py covers what only the wire adds.
"""
