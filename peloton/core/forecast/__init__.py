"""The pending-task forecast's pure parts: the live-state snapshot, the answer, and the rules
that name what binds a queued task now (see peloton/simulation/README.md, "The forecast")."""
