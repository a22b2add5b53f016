"""The job manager's gRPC servicers (v0 JobManager/TaskManager; v1alpha job, pod, watch, admin)."""
