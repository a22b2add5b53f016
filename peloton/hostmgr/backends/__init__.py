"""Host backends: where tasks really run (local agents, Mesos, simulated hosts)."""
