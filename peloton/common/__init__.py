"""Shared daemon machinery; imports only peloton.core and third-party libraries.

- `deadline_queue`, `goalstate`: the generic goal-state engine (deadline queue, one evaluation
  per entity at a time, capped exponential backoff, gevent worker pool).
- `lifecycle`: the `Component` protocol and ordered start / reverse stop with rollback.
- `leader`, `discovery`, `serverset`: ZooKeeper election with a fencing epoch, leader
  discovery, Aurora ServerSet membership.
- `retry`, `config`, `metrics`, `logging`, `geventsetup`: retries with injected clock and sleep,
  YAML + environment config, per-daemon Prometheus registries, log setup, gevent patching.
"""
