#!/usr/bin/env bash
# nats.sh BUILD [N] [RATE] [SECONDS] — the nats sink's figures: the drain of
# N events (100,000) into a JetStream file stream by one relay already
# connected (pgoutbox-bench drain --warm, as the other sinks' drains), and
# the latency from commit to the stream (the server's own timestamp of each
# message minus the event's created_at, one clock) at RATE events/s (500)
# for SECONDS (20).  Starts its own PostgreSQL
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

# 1. Drain, timed as the other sinks' drains (bench/kafka.sh, http.sh): a
# relay already connected to PostgreSQL and nats-server, N events filled in
# one COPY, the clock running from its commit to the last delete.
srv0=$(cpu_s "$NATS_PID")
PGOUTBOX_RELAY_STATS_INTERVAL=0 "$BUILD/bench/pgoutbox-bench" drain --events "$N" --relays 1 --warm --timeout 120 \
	--db "$DATABASE_URL" --json "$TMP/drain.jsonl" --label "nats: drain $N, 1 relay" --relay-log "$TMP/relay.log" \
	--relay-cmd "$PGO_BIN relay --sink nats --nats-url $NATS_URL --batch 1000 --log-level debug" >/dev/null
srv1=$(cpu_s "$NATS_PID")
[ "$(js info BENCH)" = "$N" ] || { echo "nats.sh: $(js info BENCH) of $N in the stream" >&2; exit 1; }
python3 - "$TMP/drain.jsonl" "$N" "$srv0" "$srv1" <<'PY'
import json, sys
m = {r['metric']: r['value'] for r in map(json.loads, open(sys.argv[1]))}
n, s0, s1 = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
print(f"drain: {n} events in {m['seconds']:.2f} s = {m['events_per_s']:,.0f} events/s")
print(f"drain CPU per event: relay {m['relay_cpu_us_per_event']:.1f} us, nats-server {(s1 - s0) * 1e6 / n:.1f} us")
PY
echo "drain: $(batch_times "$TMP/relay.log")"

# 2. Latency at RATE events/s, one event per transaction.
PGOUTBOX_RELAY_STATS_INTERVAL=0 "$PGO_BIN" relay --sink nats --nats-url "$NATS_URL" --log-level debug 2>"$TMP/relay-lat.log" &
RELAY=$!
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<SQL
CREATE PROCEDURE bench_produce(n int, pause float8) LANGUAGE plpgsql AS \$\$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
    FOR i IN 1..n LOOP
        PERFORM pg_sleep(greatest(0, extract(epoch FROM t0 + i * pause * interval '1 second' - clock_timestamp())));
        -- The sleep ends a transaction of its own: created_at (now(), the
        -- transaction's start) is the send's time, not the sleep's.
        COMMIT;
        PERFORM pgoutbox.send('bench.lat', 'k' || (i % 100), 'x', jsonb_build_object('i', i));
        COMMIT;
    END LOOP;
END \$\$;
SQL
q "CALL bench_produce($((RATE * SECS)), 1.0 / $RATE)"
until [ "$(q 'SELECT count(*) FROM pgoutbox.outbox')" = 0 ]; do sleep 0.05; done
kill -TERM "$RELAY"; wait "$RELAY" || true; RELAY=
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
