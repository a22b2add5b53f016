"""Every CQL statement of the Cassandra backend, prepared once per session.

Grouped by table group; names are what the backend modules execute.
Tables and columns are those of migrations/cql/ (a unit test checks that
each statement refers only to columns the migrations create, restricts
keys the way CQL allows, and binds with the driver).
"""

from __future__ import annotations

from peloton.storage.cassandra.cql import Cql, Where, delete, eq, insert, select, update

INDEX_CONFIG_COLUMNS = ("config_version", "name", "name_lower", "job_type", "owner",
                        "owning_team", "respool_id", "instance_count", "labels", "sla",
                        "search_text")
INDEX_RUNTIME_COLUMNS = ("state", "creation_time", "completion_time", "update_time", "runtime")
INDEX_COLUMNS = ("job_id", *INDEX_CONFIG_COLUMNS, *INDEX_RUNTIME_COLUMNS)

#: (table, partition key columns, clustering columns, payload column, revision column)
#: for every table a BulkStore kind maps onto; scans page through these.
SCANNED: dict[str, tuple[str, tuple[str, ...], tuple[str, ...], str | None, str | None]] = {
    "respool": ("respools", ("respool_id",), (), "body", None),
    "host": ("host_info", ("hostname",), (), "body", None),
    "framework": ("frameworks", ("framework_name",), (), "body", None),
    "job_config": ("job_config", ("job_id",), ("version",), "body", None),
    "job_runtime": ("job_runtime", ("job_id",), (), "body", "revision"),
    "job_name": ("job_name_to_id", ("job_name",), ("job_id",), "body", None),
    "active_job": ("active_jobs", ("shard_id",), ("job_id",), None, None),
    "secret": ("secret_info", ("secret_id",), (), "body", None),
    "volume": ("persistent_volumes", ("volume_id",), (), "body", None),
    "task_config": ("task_config", ("job_id", "version"), ("instance_id",), "body", None),
    "task_runtime": ("task_runtime", ("job_id",), ("instance_id",), "body", "revision"),
    "pod_event": ("pod_events", ("job_id", "instance_id"), ("run_id", "time_us", "state"),
                  "body", None),
    "update": ("update_info", ("update_id",), (), "body", "revision"),
    "workflow_event": ("workflow_events", ("update_id",), ("instance_id", "time_us", "state"),
                       "body", None),
    "cron_job": ("cron_jobs", ("name",), (), "body", "revision"),
}


def _by(table: str, key: str) -> list[Cql]:
    """Insert / delete / select of a (key, job_id) lookup table."""
    return [insert(f"{table}.add", table, (key, "job_id")),
            delete(f"{table}.remove", table, *eq(key, "job_id")),
            select(f"{table}.ids", table, ("job_id",), *eq(key))]


def _scans() -> list[Cql]:
    out = []
    for kind, (table, pk, ck, payload, rev) in SCANNED.items():
        cols = (*pk, *ck, *(c for c in (rev, payload) if c is not None))
        out += [select(f"scan.{kind}.first", table, cols, limit=True),
                select(f"scan.{kind}.after", table, cols, Where(pk, ">", token=True), limit=True),
                select(f"scan.{kind}.partition", table, cols, *eq(*pk)),
                select(f"scan.{kind}.keys", table, (*pk, *ck))]
    return out


_ALL: list[Cql] = [
    # -- job configs ----------------------------------------------------------
    insert("job_config.create", "job_config", ("job_id", "version", "created_at", "body"),
           if_not_exists=True),
    insert("job_config.put", "job_config", ("job_id", "version", "created_at", "body")),
    select("job_config.get", "job_config", ("version", "body"), *eq("job_id", "version")),
    select("job_config.newest", "job_config", ("version", "body"), *eq("job_id"), limit=True),
    select("job_config.versions", "job_config", ("version",), *eq("job_id")),
    delete("job_config.delete", "job_config", *eq("job_id", "version")),
    delete("job_config.delete_all", "job_config", *eq("job_id")),
    # -- job runtime (LWT) ------------------------------------------------------
    insert("job_runtime.create", "job_runtime", ("job_id", "revision", "state", "body"),
           if_not_exists=True),
    insert("job_runtime.put", "job_runtime", ("job_id", "revision", "state", "body")),
    select("job_runtime.get", "job_runtime", ("revision", "body"), *eq("job_id")),
    update("job_runtime.cas", "job_runtime", ("revision", "state", "body"), *eq("job_id"),
           if_columns=("revision",)),
    delete("job_runtime.delete", "job_runtime", *eq("job_id")),
    # -- job index and its lookup tables ------------------------------------------
    select("job_index.get", "job_index", INDEX_COLUMNS, *eq("job_id")),
    select("job_index.get_many", "job_index", INDEX_COLUMNS, Where(("job_id",), "IN")),
    select("job_index.all", "job_index", INDEX_COLUMNS),
    update("job_index.set_config", "job_index", INDEX_CONFIG_COLUMNS, *eq("job_id")),
    update("job_index.set_runtime", "job_index", INDEX_RUNTIME_COLUMNS, *eq("job_id")),
    delete("job_index.delete", "job_index", *eq("job_id")),
    *_by("job_index_by_state", "state"),
    *_by("job_index_by_owner", "owner"),
    *_by("job_index_by_respool", "respool_id"),
    *_by("job_index_by_label", "label"),
    # -- names and the active set ---------------------------------------------------
    insert("job_name.add", "job_name_to_id", ("job_name", "job_id", "update_time", "body")),
    select("job_name.get", "job_name_to_id", ("job_id", "update_time", "body"),
           *eq("job_name")),
    delete("job_name.remove", "job_name_to_id", *eq("job_name", "job_id")),
    insert("job_names_by_job.add", "job_names_by_job", ("job_id", "job_name")),
    select("job_names_by_job.get", "job_names_by_job", ("job_name",), *eq("job_id")),
    delete("job_names_by_job.delete", "job_names_by_job", *eq("job_id")),
    delete("job_names_by_job.remove", "job_names_by_job", *eq("job_id", "job_name")),
    insert("active_jobs.add", "active_jobs", ("shard_id", "job_id")),
    delete("active_jobs.remove", "active_jobs", *eq("shard_id", "job_id")),
    select("active_jobs.all", "active_jobs", ("job_id",), *eq("shard_id")),
    # -- task configs -------------------------------------------------------------
    insert("task_config.put", "task_config", ("job_id", "version", "instance_id", "body")),
    select("task_config.get", "task_config", ("instance_id", "body"),
           *eq("job_id", "version"), Where(("instance_id",), "IN")),
    select("task_config.all", "task_config", ("instance_id", "body"), *eq("job_id", "version")),
    delete("task_config.delete", "task_config", *eq("job_id", "version")),
    delete("task_config.remove", "task_config", *eq("job_id", "version", "instance_id")),
    insert("task_config_versions.add", "task_config_versions", ("job_id", "version")),
    select("task_config_versions.get", "task_config_versions", ("version",), *eq("job_id")),
    delete("task_config_versions.remove", "task_config_versions", *eq("job_id", "version")),
    delete("task_config_versions.delete", "task_config_versions", *eq("job_id")),
    # -- task runtimes (LWT) ----------------------------------------------------------
    insert("task_runtime.put", "task_runtime",
           ("job_id", "instance_id", "revision", "state", "body")),
    select("task_runtime.get", "task_runtime", ("instance_id", "revision", "body"),
           *eq("job_id", "instance_id")),
    select("task_runtime.get_many", "task_runtime", ("instance_id", "revision", "body"),
           *eq("job_id"), Where(("instance_id",), "IN")),
    select("task_runtime.all", "task_runtime", ("instance_id", "revision", "state", "body"),
           *eq("job_id")),
    select("task_runtime.instances", "task_runtime", ("instance_id", "revision"), *eq("job_id")),
    update("task_runtime.cas", "task_runtime", ("revision", "state", "body"),
           *eq("job_id", "instance_id"), if_columns=("revision",)),
    delete("task_runtime.delete", "task_runtime", *eq("job_id", "instance_id")),
    delete("task_runtime.delete_all", "task_runtime", *eq("job_id")),
    # -- pod events -----------------------------------------------------------------
    insert("pod_events.add", "pod_events",
           ("job_id", "instance_id", "run_id", "time_us", "state", "body"), ttl=True),
    select("pod_events.get", "pod_events", ("run_id", "body"), *eq("job_id", "instance_id"),
           limit=True),
    select("pod_events.get_run", "pod_events", ("run_id", "body"),
           *eq("job_id", "instance_id", "run_id"), limit=True),
    delete("pod_events.delete_runs", "pod_events", *eq("job_id", "instance_id"),
           Where(("run_id",), ">="), Where(("run_id",), "<")),
    delete("pod_events.delete", "pod_events", *eq("job_id", "instance_id")),
    delete("pod_events.remove", "pod_events",
           *eq("job_id", "instance_id", "run_id", "time_us", "state")),
    insert("pod_event_instances.add", "pod_event_instances", ("job_id", "instance_id")),
    select("pod_event_instances.get", "pod_event_instances", ("instance_id",), *eq("job_id")),
    delete("pod_event_instances.delete", "pod_event_instances", *eq("job_id")),
    # -- updates and workflow events ------------------------------------------------------
    insert("update_info.create", "update_info",
           ("update_id", "job_id", "revision", "state", "creation_time", "body"),
           if_not_exists=True),
    insert("update_info.put", "update_info",
           ("update_id", "job_id", "revision", "state", "creation_time", "body")),
    select("update_info.get", "update_info", ("job_id", "revision", "body"), *eq("update_id")),
    update("update_info.cas", "update_info", ("revision", "state", "creation_time", "body"),
           *eq("update_id"), if_columns=("revision",)),
    delete("update_info.delete", "update_info", *eq("update_id")),
    insert("updates_by_job.add", "updates_by_job", ("job_id", "update_id")),
    select("updates_by_job.get", "updates_by_job", ("update_id",), *eq("job_id")),
    delete("updates_by_job.remove", "updates_by_job", *eq("job_id", "update_id")),
    delete("updates_by_job.delete", "updates_by_job", *eq("job_id")),
    insert("workflow_events.add", "workflow_events",
           ("update_id", "instance_id", "time_us", "state", "body")),
    select("workflow_events.get", "workflow_events", ("body",), *eq("update_id", "instance_id"),
           limit=True),
    delete("workflow_events.delete", "workflow_events", *eq("update_id")),
    delete("workflow_events.remove", "workflow_events",
           *eq("update_id", "instance_id", "time_us", "state")),
    # -- cluster tables -------------------------------------------------------------------
    insert("respools.create", "respools", ("respool_id", "body"), if_not_exists=True),
    insert("respools.put", "respools", ("respool_id", "body")),
    update("respools.replace", "respools", ("body",), *eq("respool_id"), if_exists=True),
    select("respools.get", "respools", ("body",), *eq("respool_id")),
    select("respools.all", "respools", ("respool_id", "body")),
    delete("respools.delete", "respools", *eq("respool_id")),
    insert("host_info.put", "host_info", ("hostname", "state", "body")),
    select("host_info.get", "host_info", ("body",), *eq("hostname")),
    select("host_info.all", "host_info", ("hostname", "state", "body")),
    delete("host_info.delete", "host_info", *eq("hostname")),
    insert("secret_info.create", "secret_info", ("secret_id", "job_id", "body"),
           if_not_exists=True),
    insert("secret_info.put", "secret_info", ("secret_id", "job_id", "body")),
    update("secret_info.replace", "secret_info", ("job_id", "body"), *eq("secret_id"),
           if_exists=True),
    select("secret_info.get", "secret_info", ("job_id", "body"), *eq("secret_id")),
    delete("secret_info.delete", "secret_info", *eq("secret_id")),
    insert("secrets_by_job.add", "secrets_by_job", ("job_id", "secret_id")),
    select("secrets_by_job.get", "secrets_by_job", ("secret_id",), *eq("job_id")),
    delete("secrets_by_job.remove", "secrets_by_job", *eq("job_id", "secret_id")),
    insert("persistent_volumes.create", "persistent_volumes", ("volume_id", "job_id", "body"),
           if_not_exists=True),
    insert("persistent_volumes.put", "persistent_volumes", ("volume_id", "job_id", "body")),
    update("persistent_volumes.replace", "persistent_volumes", ("job_id", "body"),
           *eq("volume_id"), if_exists=True),
    select("persistent_volumes.get", "persistent_volumes", ("body",), *eq("volume_id")),
    select("persistent_volumes.all", "persistent_volumes", ("volume_id", "job_id", "body")),
    delete("persistent_volumes.delete", "persistent_volumes", *eq("volume_id")),
    insert("frameworks.put", "frameworks", ("framework_name", "body")),
    select("frameworks.get", "frameworks", ("body",), *eq("framework_name")),
    delete("frameworks.delete", "frameworks", *eq("framework_name")),
    # -- cron jobs (migration 0003) -------------------------------------------------------
    insert("cron_jobs.create", "cron_jobs", ("name", "revision", "body"), if_not_exists=True),
    insert("cron_jobs.put", "cron_jobs", ("name", "revision", "body")),
    select("cron_jobs.get", "cron_jobs", ("name", "revision", "body"), *eq("name")),
    select("cron_jobs.all", "cron_jobs", ("name", "body")),
    update("cron_jobs.cas", "cron_jobs", ("revision", "body"), *eq("name"), if_columns=("revision",)),
    delete("cron_jobs.delete", "cron_jobs", *eq("name")),
    # -- copy checkpoints -----------------------------------------------------------------
    insert("copy_checkpoints.put", "copy_checkpoints",
           ("copy_id", "kind", "cursor", "done", "passes", "copied")),
    select("copy_checkpoints.get", "copy_checkpoints",
           ("cursor", "done", "passes", "copied"), *eq("copy_id", "kind")),
    delete("copy_checkpoints.delete", "copy_checkpoints", *eq("copy_id")),
    # -- leadership epochs (fencing, LWT) ---------------------------------------------------
    insert("leader_epochs.create", "leader_epochs", ("role", "epoch", "holder"), if_not_exists=True),
    select("leader_epochs.get", "leader_epochs", ("epoch", "holder"), *eq("role")),
    update("leader_epochs.cas", "leader_epochs", ("epoch", "holder"), *eq("role"),
           if_columns=("epoch",)),
    *_scans(),
]

STATEMENTS: dict[str, Cql] = {s.name: s for s in _ALL}
assert len(STATEMENTS) == len(_ALL), "duplicate statement names"
