"""Aurora -> Peloton converters (Aurora Thrift structs in, v1alpha protobuf messages out).

One module per concept: job keys and names, resources, the task command
(Thermos processes), constraints, the pod spec, the job spec with its
create/update specs, and state filters.  Converters validate what they
convert and raise peloton.core.errors.InvalidArgument naming the field, so a
request is rejected before any Peloton call is made.
"""
