#!/bin/bash
# A one-node Slurm cluster on this machine, for tests and for trying
# `evald submit slurm` (Debian's slurm-wlm and munge; run as root):
#   scripts/slurm-local.sh start DIR   writes DIR/slurm.conf, starts munged,
#                                      slurmctld and slurmd on free ports, and
#                                      waits until the node is idle; prints
#                                      "export SLURM_CONF=DIR/slurm.conf"
#   scripts/slurm-local.sh stop DIR    stops them
# Exit 77 when the cluster cannot start here (no packages, not root): a test
# that needs it skips.
set -uo pipefail
cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
dir=$(mkdir -p "$dir" && cd "$dir" && pwd)

stop() {
	for p in slurmd slurmctld munged; do
		[ -f "$dir/$p.pid" ] && kill "$(cat "$dir/$p.pid")" 2>/dev/null
	done
	sleep 0.5
	for p in slurmd slurmctld munged; do
		[ -f "$dir/$p.pid" ] && kill -9 "$(cat "$dir/$p.pid")" 2>/dev/null
		rm -f "$dir/$p.pid"
	done
	return 0
}

if [ "$cmd" = stop ]; then stop; exit 0; fi
[ "$cmd" = start ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
for b in munged slurmctld slurmd sbatch squeue scontrol; do
	command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || { echo "slurm-local: $b is not installed (apt-get install slurm-wlm munge)"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "slurm-local: needs root (the daemons run as root here)"; exit 77; }
export PATH=$PATH:/usr/sbin

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
		echo $((20000 + RANDOM % 20000))
}
host=$(hostname -s)
cpus=$(nproc)
mem=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
mkdir -p "$dir/state" "$dir/spool" "$dir/log"
dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
chmod 600 "$dir/munge.key"
cat > "$dir/slurm.conf" <<CONF
ClusterName=evald$$
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
MinJobAge=600
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$dir/slurm.conf
munged --force --socket="$dir/munge.socket" --key-file="$dir/munge.key" --pid-file="$dir/munged.pid" \
	--log-file="$dir/log/munged.log" --seed-file="$dir/munge.seed" </dev/null >/dev/null 2>&1 || { echo "slurm-local: munged did not start"; stop; exit 77; }
# the daemons' stdio away from whoever started this script (a pipe would stay open)
slurmctld -f "$dir/slurm.conf" -i </dev/null >/dev/null 2>&1 || { echo "slurm-local: slurmctld did not start"; tail -5 "$dir/log/slurmctld.log"; stop; exit 77; }
slurmd -f "$dir/slurm.conf" </dev/null >/dev/null 2>&1 || { echo "slurm-local: slurmd did not start"; tail -5 "$dir/log/slurmd.log"; stop; exit 77; }
for i in $(seq 1 60); do
	state=$(sinfo -h -N -o %t 2>/dev/null | head -1)
	case "$state" in idle*|mix*|alloc*) echo "export SLURM_CONF=$dir/slurm.conf"; exit 0 ;; esac
	sleep 0.5
done
echo "slurm-local: the node did not come up (state '$state'):"
tail -5 "$dir/log/slurmctld.log" "$dir/log/slurmd.log"
stop
exit 77
