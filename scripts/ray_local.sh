#!/usr/bin/env bash
# A local Ray cluster for the Ray fit engine's tests and benchmarks/scale_out.py: a head
# node on 127.0.0.1 whose raylet, GCS, dashboard (the job API the engine submits to) and
# worker processes run apart from the caller. Needs the ray extra (pip install -e '.[ray]').
#   bash scripts/ray_local.sh start [CPUS]   prints RAY_ADDRESS=http://127.0.0.1:PORT last
#   bash scripts/ray_local.sh stop
set -euo pipefail
cmd=${1:-start}
here=$(cd "$(dirname "$0")/.." && pwd)
ray=${RAY_CLI:-$here/.venv/bin/ray}
# socket paths under Ray's temp folder must stay short (AF_UNIX: 107 bytes)
state=/tmp/sphr-ray
export RAY_USAGE_STATS_ENABLED=0

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

case "$cmd" in
start)
    cpus=${2:-2}
    if [[ -f $state/address ]] && "$ray" status --address "$(cat "$state/gcs")" >/dev/null 2>&1; then
        echo "RAY_ADDRESS=$(cat "$state/address")"; exit 0
    fi
    rm -rf "$state"; mkdir -p "$state"
    gcs=$(free_port); dash=$(free_port)
    # every daemon on the loopback address: nothing here is meant to be reached from outside
    "$ray" start --head --node-ip-address=127.0.0.1 --port="$gcs" --num-cpus="$cpus" \
        --num-gpus=0 --include-dashboard=true --dashboard-host=127.0.0.1 \
        --dashboard-port="$dash" --disable-usage-stats --temp-dir="$state/tmp" \
        >"$state/start.log" 2>&1 || { echo "ray start failed: $(tail -n 3 "$state/start.log")" >&2; exit 1; }
    echo "127.0.0.1:$gcs" >"$state/gcs"
    echo "http://127.0.0.1:$dash" >"$state/address"
    # the job API answers a few seconds after `ray start` returns
    for _ in $(seq 60); do
        if "$ray" job list --address "$(cat "$state/address")" >/dev/null 2>&1; then
            echo "RAY_ADDRESS=$(cat "$state/address")"; exit 0
        fi
        sleep 1
    done
    echo "ray: the job API at $(cat "$state/address") did not answer within 60 s" >&2; exit 1
    ;;
stop)
    "$ray" stop --force >/dev/null 2>&1 || true
    rm -rf "$state"
    ;;
*)
    echo "usage: $0 start [CPUS] | stop" >&2; exit 2
    ;;
esac
