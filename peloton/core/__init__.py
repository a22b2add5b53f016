"""Pure scheduling logic: no I/O, no gevent, no gRPC, no database.

Everything here takes read-only snapshots (frozen dataclasses) and returns
plans (placements, entitlement tables, goal-state actions) that the daemons
apply.  An import-linter contract in `make lint` keeps it that way.
"""
