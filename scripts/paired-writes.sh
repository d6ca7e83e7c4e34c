#!/bin/bash
# Usage: scripts/paired-writes.sh BIN_A BIN_B [durable|memory] (from the
# repository root, after cargo build --release -p strand-bench): two
# strand-server binaries on loopback at the same time, each under its own
# strand-bench writes (500 writers x 256 B over 500 streams, 10 s; extra
# bench flags in BENCHARGS, the duration in SECS). Both share the
# machine's drift, so the ratio of their CPU per append holds from one
# run to the next far better than runs one after another (this machine
# drifts 10-40 %). Run it twice with the binaries swapped. Prints one line
# per server: label, appends/s, p99 ms, server CPU us per append, errors.
set -u
A=$1; B=$2; MODE=${3:-durable}
BENCH=${BENCH:-target/release/strand-bench}
D=$(mktemp -d /tmp/paired.XXXX)
# Below the ephemeral range (32768 on), where a client's port may sit.
BASE=$((20000 + RANDOM % 12000))
args() {
  if [ "$MODE" = durable ]; then echo "--data-dir $D/$1"; else echo "--memory"; fi
}
$A --listen 127.0.0.1:$((BASE+1)) $(args a) > $D/a.log 2>&1 &
PA=$!
$B --listen 127.0.0.1:$((BASE+2)) $(args b) > $D/b.log 2>&1 &
PB=$!
for _ in $(seq 1 100); do
  curl -s -o /dev/null 127.0.0.1:$((BASE+1))/ && curl -s -o /dev/null 127.0.0.1:$((BASE+2))/ && break
  sleep 0.1
done
$BENCH --url http://127.0.0.1:$((BASE+1)) --server-pid $PA writes --seconds "${SECS:-10}" ${BENCHARGS:-} > $D/a.out 2>&1 &
XA=$!
$BENCH --url http://127.0.0.1:$((BASE+2)) --server-pid $PB writes --seconds "${SECS:-10}" ${BENCHARGS:-} > $D/b.out 2>&1 &
XB=$!
wait $XA $XB
for x in a b; do
  grep -q RESULT $D/$x.out || { echo "$x: no result"; tail -5 $D/$x.out $D/$x.log; continue; }
  grep RESULT $D/$x.out | sed 's/^RESULT //' | python3 -c "
import json, sys
r = json.load(sys.stdin)
print('$x', r['appends_per_s'], r['p99_ms'], r['server_cpu_us_per_append'], r['errors'])"
done
kill $PA $PB
wait $PA $PB 2>/dev/null
rm -rf $D
