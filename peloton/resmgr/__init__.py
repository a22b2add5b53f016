"""Resource manager daemon: pool tree, entitlement, admission queues, preemption."""
