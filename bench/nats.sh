#!/usr/bin/env bash
# nats.sh BUILD [N] [RATE] [SECONDS] — the nats sink's figures: the drain of
# N events (100,000) already in the outbox into a JetStream file stream by
# one relay, and the latency from commit to the stream (the server's own
# timestamp of each message minus the event's created_at, one clock) at
# RATE events/s (500) for SECONDS (20).  Starts its own PostgreSQL
# (durable: fsync and synchronous_commit on) and nats-server.  The drain
# also reports the CPU the relay and nats-server used per event and the
# time each batch spent in the sink (publish to the last PubAck), steadier
# than the rate on a shared host.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${1:?usage: bench/nats.sh BUILD [N] [RATE] [SECONDS]}
N=${2:-100000}
RATE=${3:-500}
SECS=${4:-20}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
PGO_BIN=$BUILD/pgoutbox
TMP=$(mktemp -d /tmp/pgoutbox-nats-bench.XXXXXX)
chmod 755 "$TMP"
export T_TMP=$TMP PGO_BIN
. scripts/pg.sh
. bench/cpu.sh
. tests/nats.sh
RELAY=
cleanup() { [ -n "$RELAY" ] && kill -9 "$RELAY" 2>/dev/null; nats_stop; pg_stop; rm -rf "$TMP"; }
trap cleanup EXIT
pg_start "$TMP/pg" >/dev/null
export DATABASE_URL
DATABASE_URL=$(pg_url postgres)
"$PGO_BIN" migrate >/dev/null
nats_start "$TMP/nats"
js create BENCH 'bench.>'
q() { psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "$1"; }

# 1. Drain.
q "INSERT INTO pgoutbox.outbox (topic, key, type, payload)
   SELECT 'bench.drain', 'k' || (i % 1000), 'x', jsonb_build_object('i', i) FROM generate_series(1, $N) i"
srv0=$(cpu_s "$NATS_PID")
start=$(date +%s.%N)
PGOUTBOX_RELAY_STATS_INTERVAL=0 "$PGO_BIN" relay --sink nats --nats-url "$NATS_URL" --batch 1000 --log-level debug 2>"$TMP/relay.log" &
RELAY=$!
until [ "$(q 'SELECT count(*) FROM pgoutbox.outbox')" = 0 ]; do sleep 0.05; done
end=$(date +%s.%N)
relay_cpu=$(cpu_s "$RELAY") srv1=$(cpu_s "$NATS_PID")
[ "$(js info BENCH)" = "$N" ] || { echo "nats.sh: $(js info BENCH) of $N in the stream" >&2; exit 1; }
python3 -c "import sys; n, s, e = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]); print(f'drain: {n} events in {e - s:.2f} s = {n / (e - s):,.0f} events/s')" "$N" "$start" "$end"
python3 -c "import sys; n, r, s0, s1 = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]); print(f'drain CPU per event: relay {r * 1e6 / n:.1f} us, nats-server {(s1 - s0) * 1e6 / n:.1f} us')" "$N" "$relay_cpu" "$srv0" "$srv1"
echo "drain: $(batch_times "$TMP/relay.log")"
drain_lines=$(wc -l <"$TMP/relay.log")

# 2. Latency at RATE events/s, one event per transaction.
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<SQL
CREATE PROCEDURE bench_produce(n int, pause float8) LANGUAGE plpgsql AS \$\$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
    FOR i IN 1..n LOOP
        PERFORM pgoutbox.send('bench.lat', 'k' || (i % 100), 'x', jsonb_build_object('i', i));
        COMMIT;
        PERFORM pg_sleep(greatest(0, extract(epoch FROM t0 + i * pause * interval '1 second' - clock_timestamp())));
    END LOOP;
END \$\$;
SQL
q "CALL bench_produce($((RATE * SECS)), 1.0 / $RATE)"
until [ "$(q 'SELECT count(*) FROM pgoutbox.outbox')" = 0 ]; do sleep 0.05; done
kill -TERM "$RELAY"; wait "$RELAY" || true; RELAY=
tail -n +$((drain_lines + 1)) "$TMP/relay.log" >"$TMP/relay-lat.log"
echo "latency at $RATE/s: $(batch_times "$TMP/relay-lat.log")"
js dump BENCH >"$TMP/dump.jsonl"
python3 - "$TMP/dump.jsonl" "$RATE" <<'PY'
import json, sys
from datetime import datetime
def ts(s):
    s = s.rstrip('Z')
    if '.' in s:
        a, b = s.split('.')
        s = a + '.' + (b + '000000')[:6]
    return datetime.fromisoformat(s).timestamp()
lat = sorted((ts(m['time']) - ts(m['headers']['Pgoutbox-Created-At'])) * 1000
             for m in map(json.loads, open(sys.argv[1])) if m['subject'] == 'bench.lat')
p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
print(f'latency at {sys.argv[2]}/s, commit to stream: {len(lat)} events, '
      f'p50 {p(0.5):.2f} ms, p99 {p(0.99):.2f} ms, max {lat[-1]:.2f} ms')
PY
