#!/usr/bin/env bash
# Usage: stop.sh BASE -- stops what start.sh started there, by recorded PID only.
BASE=$1
for d in slurmd slurmctld munged; do
  f=$BASE/run/$d.bgpid; [ -f "$f" ] || continue
  p=$(cat "$f")
  if kill -0 "$p" 2>/dev/null; then
    kill -TERM "$p"
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && kill -KILL "$p"
  fi
  rm -f "$f"
done
