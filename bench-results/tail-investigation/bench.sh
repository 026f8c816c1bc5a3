#!/bin/bash
# usage: bench.sh ROUNDS name1=cmd1 name2=cmd2 ...   (cmd uses PORT placeholder)
# prints CSV: round,server,test,rps,p50,p99,max,cpu_us_per_req
ROUNDS=$1; shift
TESTS=${TESTS:-get,incr}
N=${N:-300000}
P=${P:-16}
CLK=$(getconf CLK_TCK)
port=17000
for r in $(seq 1 $ROUNDS); do
  for spec in "$@"; do
    name=${spec%%=*}; cmd=${spec#*=}
    port=$((port+1))
    c=${cmd//PORT/$port}
    bash -c "exec $c" >${TMPDIR:-/tmp}/srv-$name.log 2>&1 &
    pid=$!
    for i in $(seq 100); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.05; done
    for t in ${TESTS//,/ }; do
      s0=$(awk '{print $14+$15}' /proc/$pid/stat)
      out=$(redis-benchmark -p $port -c 50 -r 100000 -n $N -P $P -t $t -q --csv --precision 3 2>/dev/null | tail -1)
      s1=$(awk '{print $14+$15}' /proc/$pid/stat)
      cpu=$(awk -v a=$s0 -v b=$s1 -v n=$N -v hz=$CLK 'BEGIN{printf "%.2f", (b-a)/hz/n*1e6}')
      # "test","rps","avg","min","p50","p95","p99","max"
      echo "$out" | tr -d '"' | awk -F, -v r=$r -v s=$name -v cpu=$cpu '{printf "%s,%s,%s,%s,%s,%s,%s,%s\n", r,s,$1,$2,$5,$7,$8,cpu}'
    done
    kill $pid; wait $pid 2>/dev/null
  done
done
