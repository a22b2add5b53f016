"""The partition-routed store's table is total: every write of the Store is routed, refused
as cluster-wide, or about fencing itself, and its job id is where the table says."""

from __future__ import annotations

import inspect

from peloton.common.fencing import READ_PREFIXES
from peloton.storage.partition_fences import CLUSTER_WRITES, JOB_WRITES, META, By
from peloton.storage.store import Store

#: The first parameter each kind of routing reads the job id from (or its items').
FIRST_PARAM = {By.JOB_ID: {"job_id"}, By.ITEM: {"update", "secret", "volume"},
               By.BATCH: {"writes", "events"}, By.UPDATE: {"event", "update_id"}}


def store_writes() -> dict[str, list[str]]:
    return {name: list(inspect.signature(getattr(Store, name)).parameters)[1:]
            for name in dir(Store)
            if not name.startswith(("_", *READ_PREFIXES)) and callable(getattr(Store, name))}


def test_every_write_of_the_store_is_classified_once() -> None:
    writes = set(store_writes())
    routed, cluster = set(JOB_WRITES), set(CLUSTER_WRITES)
    assert writes == routed | cluster | META, "classify the new write in partition_fences.py"
    assert not routed & cluster and not routed & META and not cluster & META


def test_each_routed_write_names_its_job_where_the_table_says() -> None:
    params = store_writes()
    for name, by in JOB_WRITES.items():
        assert params[name][0] in FIRST_PARAM[by], (name, by, params[name])


def test_writes_with_a_job_id_argument_are_never_taken_for_cluster_wide() -> None:
    params = store_writes()
    assert not [n for n in CLUSTER_WRITES if "job_id" in params[n]]
