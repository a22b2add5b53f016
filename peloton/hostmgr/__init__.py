"""Host manager daemon: host registry, leases, launch/kill and the task status stream."""
