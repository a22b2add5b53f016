"""State tables and timing rules: task transitions, goal-state decisions, job state, backoff.

Every decision here is a table (a dict of Enums) or a pure function over
values, so the daemons' goal-state engines only fetch state, look up the
action and run it.
"""
