#!/usr/bin/env bash
# A real single-node Slurm on this machine, for the opt-in `slurm` tests and bench_executor.py.
#   bash scripts/slurm-local.sh start    # install slurm-wlm + munge (apt, root) if missing; start munged,
#                                        # slurmctld and slurmd; wait until the node is idle
#   bash scripts/slurm-local.sh status   # sinfo
#   bash scripts/slurm-local.sh stop     # stop the daemons this script started (by their pid files)
# Clients find the cluster through SLURM_CONF=$AUTOSCALE_SLURM_DIR/slurm.conf (default dir
# /tmp/autoscale-slurm); `start` prints the export line. No accounting database: job states come
# from squeue (the runner's Slurm executor falls back to it when sacct has no data).
set -euo pipefail
DIR="${AUTOSCALE_SLURM_DIR:-/tmp/autoscale-slurm}"
CONF="$DIR/slurm.conf"
what="${1:-start}"

stop_pid() {  # stop one daemon started here, by its pid file
  local f="$DIR/$1.pid"
  if [ -f "$f" ]; then
    local pid; pid="$(cat "$f")"
    if kill -0 "$pid" 2>/dev/null; then kill "$pid"; fi
    rm -f "$f"
  fi
}

case "$what" in
  stop)
    stop_pid slurmd; stop_pid slurmctld; stop_pid munged
    echo "[slurm-local] stopped"; exit 0 ;;
  status)
    SLURM_CONF="$CONF" sinfo; exit $? ;;
  start) ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  if [ "$(id -u)" != 0 ]; then echo "[slurm-local] slurm-wlm/munge are missing and this is not root" >&2; exit 1; fi
  echo "[slurm-local] installing slurm-wlm and munge (apt) ..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q slurm-wlm munge >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q slurm-wlm munge >/dev/null; }
fi

mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log" "$DIR/munge"
# munge: its own key and socket under DIR (nothing system-wide is touched)
if [ ! -s "$DIR/munge/munge.key" ]; then
  dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
fi
chmod 700 "$DIR/munge"; chmod 400 "$DIR/munge/munge.key"
if ! { [ -f "$DIR/munged.pid" ] && kill -0 "$(cat "$DIR/munged.pid")" 2>/dev/null; }; then
  munged --force --key-file "$DIR/munge/munge.key" --socket "$DIR/munge/munge.socket" \
         --pid-file "$DIR/munged.pid" --log-file "$DIR/log/munged.log" --seed-file "$DIR/munge/munge.seed"
fi

host="$(hostname -s)"
cpus="$(nproc)"
mem="$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))"
user="$(id -un)"
cat > "$CONF" <<CONF
ClusterName=autoscale-local
SlurmctldHost=$host
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=600
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$CONF"
if ! { [ -f "$DIR/slurmctld.pid" ] && kill -0 "$(cat "$DIR/slurmctld.pid")" 2>/dev/null; }; then
  slurmctld -c -f "$CONF"
fi
if ! { [ -f "$DIR/slurmd.pid" ] && kill -0 "$(cat "$DIR/slurmd.pid")" 2>/dev/null; }; then
  slurmd -f "$CONF"
fi
for _ in $(seq 1 60); do
  if sinfo -h -o %t 2>/dev/null | grep -q '^idle'; then
    echo "[slurm-local] up: node $host, $cpus CPUs; use: export SLURM_CONF=$CONF"
    exit 0
  fi
  sleep 1
done
echo "[slurm-local] Slurm did not come up; see $DIR/log/" >&2
exit 1
