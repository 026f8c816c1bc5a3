#!/bin/bash
# usage: trace.sh BIN OUT [test]
BIN=$1; OUT=$2; T=${3:-get}
port=17901
LIMITKV_PPROF=127.0.0.1:17902 $BIN --port $port --persistence no >${TMPDIR:-/tmp}/srv-trace.log 2>&1 &
pid=$!
for i in $(seq 100); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.05; done
redis-benchmark -p $port -c 50 -r 100000 -n 3000000 -P 16 -t $T -q --csv --precision 3 > $OUT.bench 2>/dev/null &
bp=$!
sleep 0.5
curl -s -o $OUT "http://127.0.0.1:17902/debug/pprof/trace?seconds=2"
wait $bp
cat $OUT.bench
kill $pid; wait $pid 2>/dev/null
