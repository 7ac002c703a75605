#!/bin/sh
# A Slurm cluster on this machine, for the tests of harn's cluster executor: Debian's
# slurm-wlm and munge, one slurmctld and four slurmd under one configuration in a directory
# of its own: n1, n2, n3 in the default partition `harn`, n1 alone in `one`, and n4 alone in
# `spare` for the tests that kill a node. Slurm never requeues a job here (JobRequeue=0):
# harn must see an engine's fault, not a second run behind its back.
#
#   .ci/slurm/cluster.sh start   install what is missing, start munged and the cluster
#   .ci/slurm/cluster.sh stop    stop the cluster and munged
#   .ci/slurm/cluster.sh env     print the SLURM_CONF line a shell or test exports
#   .ci/slurm/cluster.sh kill-node N | revive-node N    kill a node's slurmd, bring it back
#
# HARN_SLURM_DIR (default /tmp/harn-slurm) holds the configuration, spool, state and logs.
set -eu

dir=${HARN_SLURM_DIR:-/tmp/harn-slurm}
conf=$dir/slurm.conf
nodes="n1 n2 n3"
# A fourth node of a partition of its own, which the tests that kill a node's slurmd use so
# the other tests' nodes stay up.
spare="n4"

need_root() {
    if [ "$(id -u)" != 0 ]; then
        echo "cluster.sh: slurmd and munged need root" >&2
        exit 2
    fi
}

install() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
        && command -v srun >/dev/null && command -v munged >/dev/null; then
        return
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends slurm-wlm munge >/dev/null 2>&1 \
        || { apt-get update >/dev/null && apt-get install -y --no-install-recommends slurm-wlm munge >/dev/null; }
}

# munged wants its key 0400 in a 0700 directory owned by munge, and its socket directory
# 0755; a slurmd started while munged is down hangs and ignores TERM, so munge is proved
# with a credential round trip before any Slurm daemon starts.
start_munge() {
    mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
    if [ ! -s /etc/munge/munge.key ]; then
        dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
    fi
    chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
    chmod 0700 /etc/munge
    chmod 0400 /etc/munge/munge.key
    chmod 0755 /run/munge
    if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        runuser -u munge -- /usr/sbin/munged --force
        # Stopped again by `stop` only when started here: a machine's own munged stays.
        mkdir -p "$dir"
        touch "$dir/munged-started"
    fi
    i=0
    until munge -n 2>/dev/null | unmunge >/dev/null 2>&1; do
        i=$((i + 1))
        if [ $i -gt 50 ]; then
            echo "cluster.sh: munged does not answer" >&2
            exit 1
        fi
        sleep 0.1
    done
}

write_conf() {
    mkdir -p "$dir/state" "$dir/log"
    # Each node offers twice the machine's CPUs: concurrent tests' steps never wait for a
    # scheduling cycle, which would make them slow, not wrong.
    cpus=$(($(nproc) * 2))
    {
        echo "ClusterName=harn"
        echo "SlurmctldHost=localhost"
        echo "SlurmctldPort=${HARN_SLURM_PORT:-16817}"
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "AuthType=auth/munge"
        echo "CredType=cred/munge"
        echo "StateSaveLocation=$dir/state"
        echo "SlurmdSpoolDir=$dir/spool/%n"
        echo "SlurmctldPidFile=$dir/slurmctld.pid"
        echo "SlurmdPidFile=$dir/slurmd-%n.pid"
        echo "SlurmctldLogFile=$dir/log/slurmctld.log"
        echo "SlurmdLogFile=$dir/log/slurmd-%n.log"
        # harn confines its runs in cgroups of its own; Slurm only tracks processes.
        echo "ProctrackType=proctrack/linuxproc"
        echo "TaskPlugin=task/none"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "MpiDefault=none"
        echo "SchedulerType=sched/backfill"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_Core"
        # Never run a job twice: a dead node's job ends NODE_FAIL instead of being requeued.
        echo "JobRequeue=0"
        echo "ReturnToService=2"
        echo "SlurmdTimeout=10"
        echo "InactiveLimit=0"
        echo "KillWait=5"
        echo "MinJobAge=600"
        # Three nodes on one host overstate its hardware on purpose.
        echo "SlurmdParameters=config_overrides"
        port=${HARN_SLURMD_PORT:-16900}
        for n in $nodes $spare; do
            port=$((port + 1))
            echo "NodeName=$n NodeHostname=localhost NodeAddr=127.0.0.1 Port=$port CPUs=$cpus RealMemory=1024 State=UNKNOWN"
        done
        echo "PartitionName=harn Nodes=$(echo $nodes | tr ' ' ',') Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
        # One node alone, for measuring what three give over one.
        echo "PartitionName=one Nodes=n1 MaxTime=INFINITE State=UP OverSubscribe=NO"
        echo "PartitionName=spare Nodes=$spare MaxTime=INFINITE State=UP OverSubscribe=NO"
    } >"$conf"
}

# Asked of the pid file, not of sinfo: a client retries an absent controller for a minute.
up() {
    [ -f "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null
}

start() {
    need_root
    install
    start_munge
    if up; then
        return
    fi
    write_conf
    export SLURM_CONF="$conf"
    # -c: no job of an earlier start comes back.
    /usr/sbin/slurmctld -f "$conf" -i -c
    for n in $nodes $spare; do
        start_node "$n"
    done
    i=0
    until [ "$(timeout 5 sinfo -h -N -t idle,mix,alloc -o %N 2>/dev/null | sort -u | wc -l)" -ge 4 ]; do
        i=$((i + 1))
        if [ $i -gt 300 ]; then
            echo "cluster.sh: the nodes did not come up; see $dir/log" >&2
            sinfo -N >&2 || true
            exit 1
        fi
        sleep 0.1
    done
}

start_node() {
    mkdir -p "$dir/spool/$1"
    SLURM_CONF=$conf /usr/sbin/slurmd -f "$conf" -N "$1"
}

# A node's slurmd killed as a machine dies: no goodbye to the controller, whose node goes
# DOWN after SlurmdTimeout and whose job there ends NODE_FAIL.
kill_node() {
    pid="$dir/slurmd-$1.pid"
    [ -f "$pid" ] && kill -9 "$(cat "$pid")" 2>/dev/null || true
    rm -f "$pid"
}

# The node back: its slurmd started again and the controller told to use it.
revive_node() {
    kill_node "$1"
    start_node "$1"
    i=0
    until SLURM_CONF=$conf timeout 5 scontrol update nodename="$1" state=resume 2>/dev/null \
        || SLURM_CONF=$conf timeout 5 sinfo -h -n "$1" -t idle,mix,alloc -o %N | grep -q "$1"; do
        i=$((i + 1))
        [ $i -gt 100 ] && break
        sleep 0.2
    done
}

stop() {
    # The test cluster's jobs first: their steps' processes must not outlive it.
    if up; then
        SLURM_CONF=$conf timeout 10 scancel --user="$(id -un)" 2>/dev/null || true
        sleep 1
    fi
    for pid in "$dir"/slurmd-*.pid "$dir/slurmctld.pid"; do
        [ -f "$pid" ] && kill "$(cat "$pid")" 2>/dev/null || true
    done
    # A slurmd that lost munge ignores TERM; nothing of the test cluster may outlive it.
    sleep 1
    for pid in "$dir"/slurmd-*.pid "$dir/slurmctld.pid"; do
        [ -f "$pid" ] && kill -9 "$(cat "$pid")" 2>/dev/null || true
        rm -f "$pid"
    done
    if [ -f "$dir/munged-started" ] && [ -f /run/munge/munged.pid ]; then
        kill "$(cat /run/munge/munged.pid)" 2>/dev/null || true
        rm -f "$dir/munged-started"
    fi
}

case ${1:-} in
start) start ;;
stop) stop ;;
env) echo "SLURM_CONF=$conf" ;;
kill-node) kill_node "${2:?which node}" ;;
revive-node) revive_node "${2:?which node}" ;;
*)
    echo "usage: cluster.sh start|stop|env|kill-node NODE|revive-node NODE" >&2
    exit 2
    ;;
esac
