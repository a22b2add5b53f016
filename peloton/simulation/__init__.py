"""What-if simulation: replay a workload trace against the real scheduler on simulated hosts.

The pure parts (importable without gevent, gRPC, a database or the daemons):

- `trace`, `trace_io`: the trace model and its JSON-lines format;
- `cluster`, `pools`, `whatif`, `scenario`: the CLUSTER / POOLS / CHANGES YAML formats
  and the planner that turns them into the `Scenario` a simulator replays;
- `recorder`, `result`: what a simulator reports while it runs, and the result it builds;
- `report`, `metrics`, `report_text`, `report_json`, `plots`, `report_html`: the report;
- `google_trace`, `export_model`: trace importers' pure halves.

The edges: `export` reads a live cluster's store and archive; `engine` finds the
`Simulator` that runs the daemons (issue 17 part B). See README.md beside this file.
"""
