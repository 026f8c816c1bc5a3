#!/bin/bash
# go-redis-suite.sh: runs go-redis v9's own command suite (its Ginkgo
# specs, from the module cache) against redis-server 7.0.15 and then
# against limitkv on 127.0.0.1:6379, and compares which specs fail. The
# suite's BeforeSuite needs its whole topology (ring shards, a sentinel
# master with replicas, three sentinels, a six-node cluster): those are
# real redis-server and redis-sentinel processes on the suite's fixed
# ports, started here and stopped by pid; only the server under test
# changes. FOCUS selects specs ("Commands" by default, "streams" for the
# stream specs). Not a CI test: it uses fixed ports and takes minutes.
set -e
cd "$(dirname "$0")/.."
FOCUS=${FOCUS:-Commands}
V=$(go list -m -f '{{.Version}}' github.com/redis/go-redis/v9)
SRC=$(go env GOMODCACHE)/github.com/redis/go-redis/v9@$V
W=/tmp/go-redis-suite; D=$W/topo
for p in 6379 6380 6381 6390 6391 6392 9121 9122 9123 26379 26380 26381 16600 16601 16602 16603 16604 16605; do
	if (echo > /dev/tcp/127.0.0.1/$p) 2>/dev/null; then echo "port $p is taken: stop what listens there"; exit 1; fi
done 2>/dev/null
rm -rf $W; cp -r $SRC $W; chmod -R u+w $W; mkdir -p $D
go build -o $W/limitkv ./cmd/limitkv
start() { redis-server --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --pidfile $D/$1.pid --logfile $D/$1.log --port "$@"; }
trap 'for f in $D/*.pid; do kill $(cat $f) 2>/dev/null || true; done' EXIT
for p in 6380 6381 6390 6391 6392 9121 9122 9123; do start $p --dir $D; done
for p in 16600 16601 16602 16603 16604 16605; do mkdir -p $D/c$p; start $p --dir $D/c$p --cluster-enabled yes; done
for p in 26379 26380 26381; do
	printf "port $p\nbind 127.0.0.1\ndir $D\n" > $D/s$p.conf
	redis-sentinel $D/s$p.conf --daemonize yes --pidfile $D/$p.pid --logfile $D/$p.log
done
# serving names what answers on 6379, so that a leftover server cannot
# stand in for the one under test.
serving() { redis-cli -p 6379 info server | tr -d '\r' | sed -n 's/^executable://p'; }
suite() { (cd $W && REDIS_VERSION=7.0 go test -v -count=1 -run TestGinkgoSuite . -ginkgo.focus "$FOCUS" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' > $W/$1.txt) || true
	grep -E "Passed \|" $W/$1.txt | tail -1
	grep -E "^\s*\[FAIL\]" $W/$1.txt | sort -u > $W/$1.fail; }
start 6379 --dir $D; sleep 0.5
echo "redis-server ($(serving)): $(suite redis)"
kill $(cat $D/6379.pid); sleep 0.5
mkdir -p $D/lk; $W/limitkv --port 6379 --dir $D/lk > $D/limitkv.log 2>&1 & echo $! > $D/6379.pid; sleep 1
echo "limitkv ($(serving)): $(suite limitkv)"
if diff $W/redis.fail $W/limitkv.fail >/dev/null; then echo "the same specs fail on both"; else diff $W/redis.fail $W/limitkv.fail; fi
