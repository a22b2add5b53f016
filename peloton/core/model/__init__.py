"""Frozen value types of the scheduling core: ids, resources, jobs, tasks, pools, hosts, updates."""
