"""The announcer: ZooKeeper ServerSet members for the running instances of announced jobs."""
