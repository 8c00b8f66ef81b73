#!/usr/bin/env bash
# rabbitmq.sh BUILD [--quick] — `make bench-rabbitmq`: the rabbitmq sink
# against a throwaway rabbitmq-server node (tests/rabbitmq.sh: private node
# name, ports and data) and PostgreSQL cluster (scripts/pg.sh, fsync on).
#  1. drain: N events (100,000; --quick 5,000) already in the outbox, one
#     relay (concurrent mode, batch 1000, 4 in flight) into a durable
#     classic queue with persistent messages and publisher confirms:
#     events/s from relay start to an empty outbox (target >= 30,000/s);
#  2. latency: a producer commits one event per transaction at 500/s for
#     10 s (--quick 2 s) through an ordered relay; amqplib consumes and
#     reports commit-to-consumer p50/p90/p99/max in ms (target p99 <= 10
#     ms: this includes the confirm and the delivery to the consumer).
# Prints one line per figure; the drain also the CPU the relay and the
# broker used per event and the time each batch spent in the sink (publish
# to the last confirm), steadier than the rate on a shared host.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${1:?usage: bench/rabbitmq.sh BUILD_DIR [--quick]}
QUICK=0
[ "${2:-}" = --quick ] && QUICK=1
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
export PGO_BIN=$BUILD/pgoutbox
[ -x "$PGO_BIN" ] || { echo "rabbitmq.sh: $PGO_BIN not built" >&2; exit 2; }
N=100000 SECS=10
[ $QUICK = 1 ] && N=5000 SECS=2

T_TMP=$(mktemp -d /tmp/pgoutbox-bench-rabbitmq.XXXXXX)
chmod 755 "$T_TMP"
export T_TMP
. tests/lib.sh
. bench/cpu.sh
. tests/rabbitmq.sh
. tests/rabbitmq_defs.sh
cleanup() { cleanup_pids; rabbit_kill9; pg_stop; rm -rf "$T_TMP"; }
trap cleanup EXIT
pg_start "$T_TMP/pg" >/dev/null
amqplib_ready
rabbit_defs "$T_TMP/defs.json"
rabbit_start "$T_TMP/rabbit" "$T_TMP/defs.json"
t_db bench_rabbitmq
RELAY=(--sink rabbitmq --amqp-url "$RABBIT_URL" --amqp-exchange pgo)

# 1. drain
q "INSERT INTO pgoutbox.outbox (topic, type, payload)
   SELECT 'orders', 'bench', jsonb_build_object('i', i, 'pad', repeat('x', 100))
   FROM generate_series(1, $N) i"
b0=$(cpu_s "$RABBIT_PID")
t0=$(date +%s.%N)
start_relay "$T_TMP/drain" "${RELAY[@]}" --mode concurrent --batch 1000 --in-flight 4 --log-level debug
wait_until 600 '[ "$(pending)" = 0 ]'
t1=$(date +%s.%N)
relay_cpu=$(cpu_s "$RELAY_PID") b1=$(cpu_s "$RABBIT_PID")
stop_relay "$RELAY_PID"
python3 - "$N" "$t0" "$t1" "$relay_cpu" "$b0" "$b1" <<'PY'
import sys
n, t0, t1, cpu, b0, b1 = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
print(f'drain: {n} events in {t1 - t0:.1f} s: {n / (t1 - t0):,.0f} events/s (target >= 30,000); relay CPU {cpu:.2f} s')
print(f'drain CPU per event: relay {cpu * 1e6 / n:.1f} us, broker {(b1 - b0) * 1e6 / n:.1f} us')
PY
echo "drain: $(batch_times "$T_TMP/drain.log")"
node -e "require('$AMQP_JS/node_modules/amqplib').connect('$RABBIT_URL').then(c => c.createChannel().then(ch => ch.purgeQueue('q.orders')).then(() => c.close()))"

# 2. latency at 500/s
M=$((SECS * 500))
start_relay "$T_TMP/lat" "${RELAY[@]}" --batch 500
wait_until 30 'grep -q "connected to" "$T_TMP/lat.log"'
AMQPLIB=$AMQP_JS/node_modules/amqplib node bench/rabbitmq-latency.js "$RABBIT_URL" q.orders "$M" >"$T_TMP/lat.out" &
consumer=$!
python3 - "$DATABASE_URL" "$M" <<'PY'
import subprocess, sys, time
url, m = sys.argv[1], int(sys.argv[2])
p = subprocess.Popen(['psql', '-XAtq', url], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
t0 = time.time()
for i in range(m):
    d = t0 + i / 500.0 - time.time()
    if d > 0:
        time.sleep(d)
    p.stdin.write("SELECT pgoutbox.send('orders', 'k%d', 'lat', '{}');\n" % (i % 50))
    p.stdin.flush()
p.stdin.close()
p.wait()
PY
wait "$consumer"
stop_relay "$RELAY_PID"
read -r p50 p90 p99 max <"$T_TMP/lat.out"
echo "latency at 500/s, commit to consumer, $M events: p50 ${p50} ms, p90 ${p90} ms, p99 ${p99} ms (target <= 10), max ${max} ms"
