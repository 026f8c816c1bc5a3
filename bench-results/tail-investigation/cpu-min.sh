#!/bin/bash
# cpu-min.sh BIN ROUNDS: server CPU per request (utime+stime from /proc)
# of Redis's INCR and limitkv's INCR, RL.FIXED and RL.SLIDE at depth 16
# over 100,000 keys, 500,000 requests a run, ROUNDS interleaved rounds:
# the minimum over rounds is the figure least moved by the neighbours.
set -e
BIN=${1:?limitkv binary}; ROUNDS=${2:-10}
"$BIN" --port 7431 --persistence no >/dev/null 2>&1 & LK=$!
redis-server --port 7432 --save '' --appendonly no >/dev/null 2>&1 & RS=$!
trap 'kill $LK $RS' EXIT
sleep 1
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
run() { local port=$1 pid=$2; shift 2; local a b; a=$(cpu $pid); redis-benchmark -p $port -c 50 -r 100000 -n 500000 -P 16 -q "$@" >/dev/null; b=$(cpu $pid); echo "($b - $a) * 10000 / 500000" | bc -l | cut -c1-5; }
for r in $(seq $ROUNDS); do
 echo "$r,redis,INCR,$(run 7432 $RS INCR counter:__rand_int__)"
 echo "$r,limitkv,INCR,$(run 7431 $LK INCR counter:__rand_int__)"
 echo "$r,limitkv,RL.FIXED,$(run 7431 $LK RL.FIXED fixed:__rand_int__ 100 60s)"
 echo "$r,limitkv,RL.SLIDE,$(run 7431 $LK RL.SLIDE slide:__rand_int__ 100 60s)"
done
