#!/bin/bash
# Usage: scripts/placement-load.sh BIN N LABEL (from the repository root,
# after cargo build --release -p strand-server -p strand-bench): a static
# cluster of N nodes of BIN on loopback, --groups 6,
# 500 writers x 100 B spread over every node for 8 s once the placement
# settled; prints one table row: leaders, appends/s, p99, CPU s per node
# (from /proc), the busiest node's share, summed CPU µs per append.
set -u
BIN=$1; N=$2; LABEL=$3
BENCH=${BENCH:-target/release/strand-bench}
D=$(mktemp -d /tmp/place.XXXX)
BASE=$((20000 + RANDOM % 20000))
PEERS=""
for i in $(seq 1 $N); do PEERS="$PEERS --peer $i=http://127.0.0.1:$((BASE+i))"; done
PIDS=()
for i in $(seq 1 $N); do
  $BIN --listen 127.0.0.1:$((BASE+i)) --admin-listen 127.0.0.1:$((BASE+100+i)) --data-dir $D/n$i --node-id $i --groups 6 $PEERS > $D/log$i 2>&1 &
  PIDS+=($!)
done
# Ready: every node healthy, and the placement settled (3 voters, no
# learners outside group 0) with leaders spread, as node 1 reports.
for t in $(seq 1 120); do
  ok=1
  for i in $(seq 1 $N); do
    c=$(curl -s -o /dev/null -w "%{http_code}" 127.0.0.1:$((BASE+i))/__strand/health); [ "$c" = 200 ] || ok=0
  done
  if [ $ok = 1 ]; then
    s=$(curl -s 127.0.0.1:$((BASE+101))/__strand/cluster)
    echo "$s" | python3 -c "
import json,sys
v=json.load(sys.stdin); n=$N
gs=v['groups']
ok=all(len(g['voters'])==min(3,n) and g['leader'] is not None and (g['group']==0 or len(g['learners'])==0) for g in gs) and not v.get('moves')
from collections import Counter
c=Counter(g['leader'] for g in gs)
ok = ok and (max(c.values()) - (min(c.values()) if len(c)==min(n,6) else 0) <= 1)
sys.exit(0 if ok else 1)" && break
  fi
  sleep 1
done
sleep 8
LEADERS=$(curl -s 127.0.0.1:$((BASE+101))/__strand/cluster | python3 -c "import json,sys; v=json.load(sys.stdin); print(' '.join(str(g['leader']) for g in v['groups']))")
URLS=""; for i in $(seq 1 $N); do URLS="$URLS --url http://127.0.0.1:$((BASE+i))"; done
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
B=(); for p in "${PIDS[@]}"; do B+=($(cpu $p)); done
OUT=$($BENCH $URLS writes --streams 500 --writers 500 --body-bytes 100 --seconds 8 2>/dev/null | grep "^RESULT" | sed "s/^RESULT //")
A=(); for p in "${PIDS[@]}"; do A+=($(cpu $p)); done
TCK=$(getconf CLK_TCK)
python3 - "$LABEL" "$LEADERS" "$TCK" "${B[*]}" "${A[*]}" <<PY
import json,sys
label,leaders,tck,b,a=sys.argv[1:6]
b=[int(x) for x in b.split()]; a=[int(x) for x in a.split()]; tck=int(tck)
cpu=[(y-x)/tck for x,y in zip(b,a)]
out=json.loads('''$OUT''')
n=out.get('appends') or out.get('acknowledged') or 0
rate=out.get('appends_per_s') or out.get('rate') or 0
tot=sum(cpu)
print(f"| {label} | {leaders} | {rate:,.0f} | {out.get('p99_ms')} | {' / '.join(f'{c:.2f}' for c in cpu)} | {max(cpu)/tot:.3f} | {tot*1e6/max(n,1):.1f} |")
PY
for p in "${PIDS[@]}"; do kill $p; done; wait 2>/dev/null
rm -rf $D
