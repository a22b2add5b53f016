"""Peloton -> Aurora converters (v1alpha protobuf messages in, Aurora Thrift structs out).

One module per concept: job keys, task configs (from the stored TaskConfig
or the pod spec), scheduled tasks, job summaries and configurations, update
statuses and details, config groups.  Readers tolerate what Peloton may
leave empty (timestamps, pod ids) rather than failing a whole listing.
"""
