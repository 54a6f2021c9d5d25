#!/usr/bin/env bash
# A real one-node SLURM cluster on this machine, for the tests of the pipeline's SLURM
# launcher (sphr_dagster/slurm.py); CI calls it before and after those tests.
#
#   bash scripts/slurm_local.sh start  [STATE_DIR]   # last stdout line: SLURM_CONF=<path>
#   bash scripts/slurm_local.sh status [STATE_DIR]   # exit 0 + that line if the cluster answers
#   bash scripts/slurm_local.sh stop   [STATE_DIR]
#
# e.g.  export "$(bash scripts/slurm_local.sh start | tail -n 1)"
#
# STATE_DIR (default /tmp/sphr-slurm) holds slurm.conf, the daemons' pid and log files, the
# controller's state, slurmd's spool and jobcomp.log (one line per finished job, so tests
# can count jobs without slurmdbd). Needs root (a Debian/Ubuntu host: it apt-installs
# slurm-wlm and munge when they are missing). Every message but the SLURM_CONF line goes to
# stderr, so callers can take stdout as it is.
# Environment: SPHR_SLURM_WAIT_S (how long start waits for the node, default 30),
# SPHR_SLURMCTLD_PORT / SPHR_SLURMD_PORT (default 6817 / 6818, for hosts that already run
# a SLURM).
set -euo pipefail

cmd=${1:-}
state_dir=$(realpath -m "${2:-/tmp/sphr-slurm}")
conf=$state_dir/slurm.conf
wait_s=${SPHR_SLURM_WAIT_S:-30}
ctld_port=${SPHR_SLURMCTLD_PORT:-6817}
slurmd_port=${SPHR_SLURMD_PORT:-6818}

say() { echo "slurm_local: $*" >&2; }
die() { say "$*"; exit 1; }

# The last line of a daemon's log that says why it stopped, for the one-line failure reason.
last_error() {
    [[ -f $1 ]] || { echo "no log at $1"; return; }
    local line
    line=$(grep -aiE 'error|fatal' "$1" | tail -n 1 || true)
    echo "${line:-$(tail -n 1 "$1")} ($1)"
}

# A pid file's process, only while it is still that program: a stale pid file from an
# earlier run must never make stop kill an unrelated process that reused the pid.
live_pid() {
    local file=$1 prog=$2 pid
    [[ -s $file ]] || return 1
    pid=$(tr -dc '0-9' <"$file")
    [[ -n $pid && -r /proc/$pid/comm ]] || return 1
    [[ $(cat "/proc/$pid/comm") == "$prog"* ]] || return 1
    echo "$pid"
}

stop_pid_file() {
    local file=$1 prog=$2 pid i
    pid=$(live_pid "$file" "$prog") || { rm -f "$file"; return 0; }
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do  # 10 s: slurmctld saves its state on SIGTERM
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        say "$prog ($pid) ignored SIGTERM for 10 s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$file"
}

# slurmstepd processes (one per running job step) outlive slurmd. Their environment is
# empty and their command line names only the job, but they keep slurmd's log open: that
# file picks out the ones of this cluster, so stop ends only those.
our_stepds() {
    local pid
    for pid in $(pgrep -x slurmstepd || true); do
        find "/proc/$pid/fd" -maxdepth 1 -lname "$state_dir/slurmd.log" 2>/dev/null \
            | grep -q . && echo "$pid"
    done
    return 0
}

# A process and all its descendants, found before any is killed (once a parent dies its
# children move to init and can no longer be told apart from anyone else's).
process_tree() {
    # from ps, not /proc/PID/task/*/children: not every kernel (or gVisor) has that file
    ps -eo pid=,ppid= | awk -v roots="$*" '
        { parent[$1] = $2 }
        END {
            n = split(roots, todo, " ")
            for (i = 1; i <= n; i++) keep[todo[i]] = 1
            do {
                grew = 0
                for (p in parent)
                    if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; grew = 1 }
            } while (grew)
            for (p in keep) print p
        }'
}

# "Answers": the controller replies and the node is usable (not down, drained or
# unresponsive), which is what a test needs before it submits.
answers() {
    [[ -f $conf ]] || return 1
    live_pid "$state_dir/slurmctld.pid" slurmctld >/dev/null || return 1
    live_pid "$state_dir/slurmd.pid" slurmd >/dev/null || return 1
    local node
    node=$(SLURM_CONF=$conf timeout 10 sinfo -h -N -n localhost -o '%T' 2>/dev/null) || return 1
    [[ $node =~ ^(idle|mixed|allocated|completing)$ ]]
}

ensure_packages() {
    local missing=0 p
    for p in slurmctld slurmd munged sbatch; do
        command -v "$p" >/dev/null || PATH=$PATH:/usr/sbin:/sbin command -v "$p" >/dev/null || missing=1
    done
    export PATH=$PATH:/usr/sbin:/sbin
    ((missing)) || return 0
    command -v apt-get >/dev/null || die "slurmctld/slurmd/munged/sbatch missing and no apt-get to install them"
    say "installing slurm-wlm and munge (apt-get; log in $state_dir/apt.log)"
    if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
           DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge; } \
           >"$state_dir/apt.log" 2>&1; then
        die "apt-get install slurm-wlm munge failed: $(tail -n 1 "$state_dir/apt.log") ($state_dir/apt.log)"
    fi
}

ensure_munge_key() {
    install -d -o munge -g munge -m 0700 /etc/munge
    if [[ ! -s /etc/munge/munge.key ]]; then
        say "creating /etc/munge/munge.key"
        if command -v mungekey >/dev/null; then
            mungekey --create --keyfile=/etc/munge/munge.key --force
        else
            dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
        fi
    fi
    # munged refuses a key that anyone but its own user can read
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
}

munge_works() { timeout 5 munge -n 2>/dev/null | timeout 5 unmunge >/dev/null 2>&1; }

# A munged already serving the default socket (the host's own) is used as it is and left
# running by stop; only one started here is recorded (its pid file under STATE_DIR).
ensure_munged() {
    munge_works && return 0
    ensure_munge_key
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 "$state_dir/munge"
    # as the munge user, as the packaged service runs it: munged owns its key and socket
    runuser -u munge -- munged --pid-file="$state_dir/munge/munged.pid" \
        --log-file="$state_dir/munge/munged.log" 9>&- \
        || die "munged did not start: $(last_error "$state_dir/munge/munged.log")"
    local i
    for ((i = 0; i < 50; i++)); do
        munge_works && return 0
        sleep 0.1
    done
    die "munged started but munge credentials do not decode: $(last_error "$state_dir/munge/munged.log")"
}

write_conf() {
    local cpus mem_mb
    cpus=$(nproc)
    # 90% of what the kernel reports: slurmd marks a node INVAL whose RealMemory exceeds
    # what it measures, and the measure varies a little between boots and containers
    mem_mb=$(awk '/^MemTotal:/ { m = int($2 / 1024 * 0.9); print (m > 1 ? m : 1) }' /proc/meminfo)
    cat >"$conf" <<EOF
# Written by scripts/slurm_local.sh: a throwaway one-node test cluster, not a template.
ClusterName=sphr
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
# bind to the configured address (127.0.0.1) instead of every interface: NoCtldInAddrAny
# for slurmctld, NoInAddrAny for slurmd (and srun)
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$state_dir/ctld
SlurmdSpoolDir=$state_dir/slurmd
SlurmctldPidFile=$state_dir/slurmctld.pid
SlurmdPidFile=$state_dir/slurmd.pid
SlurmctldLogFile=$state_dir/slurmctld.log
SlurmdLogFile=$state_dir/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# no cgroups: containers and CI runners rarely delegate them (job accounting gathering,
# and the switch plugin, stay unset = none)
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# no slurmdbd; finished jobs are counted from the completion log instead
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$state_dir/jobcomp.log
# cores, not whole nodes, are allocated: several 1-CPU jobs share the node at once
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
# no mail on a test machine (the default /bin/mail is usually absent)
MailProg=/bin/true
# a node that was down comes back by itself when its slurmd registers again
ReturnToService=2
# short timeouts so that a test sees a dead daemon or a cancelled job within seconds
SlurmctldTimeout=10
SlurmdTimeout=10
MessageTimeout=10
KillWait=5
InactiveLimit=0
Waittime=0
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
}

do_stop() {
    if [[ -f $conf ]] && live_pid "$state_dir/slurmctld.pid" slurmctld >/dev/null &&
       live_pid "$state_dir/slurmd.pid" slurmd >/dev/null; then
        # cancel first: slurmd's exit leaves running jobs behind as orphan slurmstepds
        SLURM_CONF=$conf timeout 10 squeue -h -o %A 2>/dev/null \
            | SLURM_CONF=$conf xargs -r timeout 10 scancel --quiet 2>/dev/null || true
        local i
        for ((i = 0; i < 20; i++)); do  # KillWait=5 plus margin
            [[ -z $(our_stepds) ]] && break
            sleep 0.5
        done
    fi
    stop_pid_file "$state_dir/slurmd.pid" slurmd
    stop_pid_file "$state_dir/slurmctld.pid" slurmctld
    # left over only when slurmd was already dead (nothing told the steps to end): end
    # them and the job processes under them
    local -a left
    mapfile -t left < <(our_stepds)
    if ((${#left[@]})); then
        say "killing ${#left[@]} job step(s) left without a slurmd"
        process_tree "${left[@]}" | xargs -r kill -KILL 2>/dev/null || true
    fi
    stop_pid_file "$state_dir/munge/munged.pid" munged
}

do_start() {
    ensure_packages
    if answers; then
        echo "SLURM_CONF=$conf"
        return 0
    fi
    # whatever is left of an earlier, half-dead cluster in this STATE_DIR goes first
    do_stop
    ensure_munged
    # clean state on every start: the jobs of an earlier cluster are dead with its slurmd,
    # and a fresh controller numbers jobs from 1, so the old completion log goes too
    rm -rf "$state_dir/ctld" "$state_dir/slurmd"
    install -d -m 0755 "$state_dir/ctld" "$state_dir/slurmd"
    : >"$state_dir/jobcomp.log"
    write_conf
    export SLURM_CONF=$conf
    slurmctld -f "$conf" 9>&- ||
        { do_stop; die "slurmctld did not start: $(last_error "$state_dir/slurmctld.log")"; }
    # -N: the node is "localhost" whatever the host's own name is
    slurmd -f "$conf" -N localhost 9>&- ||
        { do_stop; die "slurmd did not start: $(last_error "$state_dir/slurmd.log")"; }
    local deadline=$((SECONDS + wait_s)) node=""
    while ((SECONDS < deadline)); do
        node=$(timeout 5 sinfo -h -N -n localhost -o '%T' 2>/dev/null || true)
        [[ $node == idle ]] && { echo "SLURM_CONF=$conf"; return 0; }
        # a daemon that died (bad config, port taken) fails now, not at the deadline;
        # the grace is for the pid files, written a moment after the daemons fork
        if ((SECONDS > deadline - wait_s + 3)); then
            live_pid "$state_dir/slurmctld.pid" slurmctld >/dev/null ||
                { do_stop; die "slurmctld exited: $(last_error "$state_dir/slurmctld.log")"; }
            live_pid "$state_dir/slurmd.pid" slurmd >/dev/null ||
                { do_stop; die "slurmd exited: $(last_error "$state_dir/slurmd.log")"; }
        fi
        sleep 0.5
    done
    local why
    if [[ -z $node ]]; then
        why="slurmctld does not answer: $(last_error "$state_dir/slurmctld.log")"
    else
        why="node localhost is '$node', not idle: $(last_error "$state_dir/slurmd.log")"
    fi
    do_stop
    die "cluster not ready after ${wait_s}s; $why"
}

case $cmd in
    start | stop)
        [[ $EUID -eq 0 ]] || die "$cmd needs root (the daemons run as root)"
        install -d -m 0755 "$state_dir"
        # one start/stop at a time per STATE_DIR: parallel test workers may all call start.
        # The daemons are started with fd 9 closed, or they would hold the lock for good.
        exec 9>"$state_dir/.lock"
        flock -w 120 9 || die "another slurm_local.sh holds $state_dir/.lock"
        if [[ $cmd == start ]]; then do_start; else do_stop; fi
        ;;
    status)
        export PATH=$PATH:/usr/sbin:/sbin
        command -v sinfo >/dev/null || die "SLURM is not installed"
        answers || die "no cluster answering for $state_dir"
        echo "SLURM_CONF=$conf"
        ;;
    *)
        echo "usage: $0 start|stop|status [STATE_DIR]" >&2
        exit 2
        ;;
esac
