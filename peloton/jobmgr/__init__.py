"""Job manager daemon: jobs, tasks and workflows driven by the goal-state engine."""
