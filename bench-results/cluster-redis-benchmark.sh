#!/usr/bin/env bash
# redis-benchmark --cluster against a 3-master limitkv cluster and a
# 3-master redis-server cluster, side by side in one run: SET, GET and INCR,
# three alternating rounds, with the server CPU of the three nodes of each
# (utime+stime from /proc, in clock ticks of 10 ms) over each run of
# 300,000 requests. Needs a limitkv binary in LIMITKV (default ./limitkv:
# go build -o limitkv ./cmd/limitkv), redis-server, redis-cli and
# redis-benchmark; writes its nodes' files under a temporary directory.
# Results: cluster-redis-benchmark.md.
set -u
LIMITKV=$(realpath "${LIMITKV:-./limitkv}")
work=$(mktemp -d)
cd "$work"
for p in 7601 7602 7603; do "$LIMITKV" --port $p --dir l$p --cluster-enabled yes --persistence no > l$p.log 2>&1 & done
for p in 7611 7612 7613; do mkdir r$p; (cd r$p && redis-server --port $p --cluster-enabled yes --save '' --appendonly no --daemonize yes --logfile log); done
# Bounded waits: each node answering, then each cluster agreeing.
for p in 7601 7602 7603 7611 7612 7613; do
  for _ in $(seq 100); do redis-cli -p $p ping >/dev/null 2>&1 && break; sleep 0.1; done
done
redis-cli --cluster create 127.0.0.1:7601 127.0.0.1:7602 127.0.0.1:7603 --cluster-yes >/dev/null 2>&1
redis-cli --cluster create 127.0.0.1:7611 127.0.0.1:7612 127.0.0.1:7613 --cluster-yes >/dev/null 2>&1
for p in 7601 7602 7603 7611 7612 7613; do
  for _ in $(seq 300); do redis-cli -p $p cluster info | grep -q cluster_state:ok && break; sleep 0.1; done
done
cpu() { local t=0; for p in "$@"; do pid=$(pgrep -f -- "--port $p" | head -1); [ -z "$pid" ] && pid=$(pgrep -f "redis-server .*:$p" | head -1); s=$(awk '{print $14+$15}' /proc/$pid/stat); t=$((t+s)); done; echo $t; }
run() { # name ports... -- test
  local name=$1; shift; local port=$1; shift; local ports="$1"; shift
  local before=$(cpu $ports)
  local out=$(redis-benchmark --cluster -p $port -t "$@" -n 300000 -c 50 -q --precision 3 2>&1 | tr '\r' '\n' | grep -v "^$" | tail -1)
  local after=$(cpu $ports)
  echo "$name $* | $out | cpu_ticks=$((after-before))"
}
for round in 1 2 3; do
  for t in set get incr; do
    run limitkv 7601 "7601 7602 7603" $t
    run redis 7611 "7611 7612 7613" $t
  done
done
for p in 7601 7602 7603 7611 7612 7613; do redis-cli -p $p shutdown nosave >/dev/null 2>&1; done
rm -rf "$work"
