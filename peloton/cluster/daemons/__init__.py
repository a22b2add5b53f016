"""Multi-process mode: each daemon as its own process (`peloton jobmgr|resmgr|hostmgr|placement`).

* `config` — the YAML schema of each daemon's process (plus environment overrides);
* `leadership` — leader election and the leader-only objects of each term;
* `roles` — what each daemon builds: its term objects, its peers' port clients;
* `process` — one daemon process: storage, gRPC server, ZooKeeper, run until a signal.

`peloton up` (peloton/cluster/allinone.py) is the other wiring of the same daemons.
"""
