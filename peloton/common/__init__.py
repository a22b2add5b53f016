"""Shared daemon machinery; imports only peloton.core and third-party libraries.

- `deadline_queue`, `goalstate`: the generic goal-state engine (a `Schedule` of keys and
  deadlines, an `Engine` that runs it with a resolver: one evaluation per key at a time,
  capped exponential backoff, gevent worker pool).
- `components`: the `Component` protocol and ordered start / reverse stop with rollback.
- `leader`, `discovery`, `serverset`: ZooKeeper election with a fencing epoch, leader
  discovery, Aurora ServerSet membership.
- `geventsetup`, `blocking`, `clock`: the one concurrency model (monkey-patching, gRPC's
  gevent mode, gevent's child reaping), the thread pool for calls that block in C, and the
  injected clock (peloton/jobmgr/README.md, "Concurrency").
- `retry`, `config`, `metrics`, `logging`: retries with injected clock and sleep, YAML +
  environment config, per-daemon Prometheus registries, log setup.
"""
