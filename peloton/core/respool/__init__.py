"""Resource pools: the tree, entitlement, queues, admission and the task tracker.

Read peloton/core/README.md for the pipeline; the entry points are
`PoolTree` (tree.py), `compute_entitlements` (entitlement.py), `TaskTracker`
(tracker.py, which owns the queues and runs admission).
"""
