#!/usr/bin/env bash
# Usage: start.sh BASE PROFILE CTLD_PORT SLURMD_PORT
# Starts a fresh one-node Slurm (munged, slurmctld, slurmd) under BASE, in the background,
# and records each daemon's PID in BASE/run/<daemon>.bgpid for stop.sh. Prints "ready"
# once the node is idle. Profiles: default (Slurm's own scheduler settings) and tuned
# (the fastest settings we found for many short jobs: no batch delay, an Epilog so the
# controller reacts to job ends at once).
set -euo pipefail
BASE=$1 PROFILE=$2 CTLD_PORT=$3 SLURMD_PORT=$4
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$BASE"; mkdir -p "$BASE"/{state,run,log,munge,out} "$BASE/spool/$(hostname)"
chmod 0755 "$BASE"
chown munge:munge "$BASE/munge"; chmod 0755 "$BASE/munge"
HOST=$(hostname)
MEM=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
CPUS=$(nproc)
case $PROFILE in
  default) LINES='# scheduler parameters left at their defaults' ;;
  tuned)   LINES='SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,default_queue_depth=1000,bf_interval=1,bf_max_job_test=1000\nEpilog=/bin/true' ;;
  *) echo "unknown profile $PROFILE" >&2; exit 2 ;;
esac
sed -e "s/@HOST@/$HOST/g" -e "s/@MEM@/$MEM/g" -e "s/@CPUS@/$CPUS/g" -e "s|@BASE@|$BASE|g" \
    -e "s/@CTLD_PORT@/$CTLD_PORT/" -e "s/@SLURMD_PORT@/$SLURMD_PORT/" \
    -e "s|@PROFILE_LINES@|$LINES|" "$HERE/slurm.conf.in" > "$BASE/slurm.conf"
export SLURM_CONF=$BASE/slurm.conf
[ -f /etc/munge/munge.key ] || { mungekey --create 2>/dev/null || create-munge-key -f; }
setpriv --reuid=munge --regid=munge --clear-groups \
  munged -F --key-file=/etc/munge/munge.key --socket="$BASE/munge/munge.socket.2" \
  --pid-file="$BASE/munge/munged.pid" --log-file="$BASE/munge/munged.log" \
  --seed-file="$BASE/munge/munged.seed" > "$BASE/log/munged.out" 2>&1 &
echo $! > "$BASE/run/munged.bgpid"
for _ in $(seq 100); do [ -S "$BASE/munge/munge.socket.2" ] && break; sleep 0.1; done
slurmctld -D -i -f "$BASE/slurm.conf" > "$BASE/log/slurmctld.out" 2>&1 &
echo $! > "$BASE/run/slurmctld.bgpid"
for _ in $(seq 100); do scontrol ping >/dev/null 2>&1 && break; sleep 0.1; done
slurmd -D -f "$BASE/slurm.conf" > "$BASE/log/slurmd.out" 2>&1 &
echo $! > "$BASE/run/slurmd.bgpid"
for _ in $(seq 300); do
  [ "$(sinfo -h -N -o %T 2>/dev/null || true)" = idle ] && { echo ready; exit 0; }
  sleep 0.1
done
echo "slurm node did not become idle; see $BASE/log" >&2
exit 1
