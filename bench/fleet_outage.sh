#!/usr/bin/env bash
# fleet_outage.sh PGOUTBOX [--how stop|stall] [--rate N] [--up S] [--down S]
#                 [--after S] [--json FILE --run-id ID --label TEXT]
#                 [--relay-log FILE]
#
# One relay fleet over 3 PostgreSQL shards while one is down (issue 41):
# starts 3 clusters of its own (scripts/pg.sh; fsync and synchronous_commit
# on), a database on each, one `pgoutbox relay --sink stdout` serving the
# three (--db three times, ordered mode) and a pgbench producer per shard
# at --rate events/s (default 500), each event a key's next version (200
# keys) sent with its commit-side time.  After --up s (default 60) with
# all up, the third shard goes down for --down s (default 60):
#   --how stop    its cluster is stopped (pg_ctl stop -m immediate), its
#                 producer with it; started again after, a new producer
#   --how stall   the relay reaches it through a TCP proxy, stopped with
#                 SIGSTOP (connects and rounds hang, the kernel ACKs);
#                 its producer goes on writing straight to the cluster
# then runs --after s (default 30) with all up again, waits until every
# outbox is empty and reports commit-to-sink latency (p50/p99/max) per
# database and phase, when the third delivered again and caught up, and
# per-key order (bench/fleet_outage.py).  `make bench` runs both variants
# (bench/run.sh, "fleet of 3 ...").
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PGO=${1:?usage: fleet_outage.sh PGOUTBOX [--how stop|stall] ...}
shift
HOW=stop RATE=500 UP=60 DOWN=60 AFTER=30 JSON= RUN_ID= LABEL= RLOG=
while [ $# -gt 0 ]; do
	case $1 in
	--how) HOW=$2 ;;
	--rate) RATE=$2 ;;
	--up) UP=$2 ;;
	--down) DOWN=$2 ;;
	--after) AFTER=$2 ;;
	--json) JSON=$2 ;;
	--run-id) RUN_ID=$2 ;;
	--label) LABEL=$2 ;;
	--relay-log) RLOG=$2 ;;
	--db) ;; # bench/run.sh's database: this one makes its own
	*) echo "fleet_outage.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift 2
done
case $HOW in stop|stall) ;; *) echo "fleet_outage.sh: --how stop|stall" >&2; exit 2 ;; esac
. "$ROOT/scripts/pg.sh"
TMP=$(mktemp -d /tmp/pgoutbox-fleet.XXXXXX)
chmod 755 "$TMP"
RLOG=${RLOG:-$TMP/relay.log}
DIRS=() PORTS=() OPTS=() PIDS=()
cleanup() {
	for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -CONT "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for d in "${DIRS[@]:-}"; do [ -n "$d" ] && PG_DIR=$d pg_stop || true; done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for i in 1 2 3; do
	PG_PORT= pg_start "$TMP/pg$i" fsync=on synchronous_commit=on shared_buffers=128MB \
		max_wal_size=2GB checkpoint_timeout=30min ||
		{ echo "fleet_outage.sh: cannot start PostgreSQL" >&2; exit 2; }
	DIRS+=("$PG_DIR") PORTS+=("$PG_PORT") OPTS+=("$PG_OPTS")
done
url() { echo "host=127.0.0.1 port=${PORTS[$1]} user=postgres dbname=shard"; }
for i in 0 1 2; do
	psql -XAtq "host=127.0.0.1 port=${PORTS[$i]} user=postgres dbname=postgres" \
		-c "CREATE DATABASE shard" >/dev/null
	DATABASE_URL=$(url "$i") "$PGO" migrate >/dev/null 2>"$TMP/migrate.log" ||
		{ cat "$TMP/migrate.log" >&2; exit 1; }
	psql -XAtq -v ON_ERROR_STOP=1 "$(url "$i")" >/dev/null <<'SQL'
CREATE TABLE agg (key text PRIMARY KEY, version int NOT NULL DEFAULT 0);
INSERT INTO agg (key) SELECT 'k' || i FROM generate_series(1, 200) i;
SQL
done
# One event per transaction: a key's next version, sent with the time.
cat >"$TMP/produce.sql" <<'SQL'
\set k random(1, 200)
WITH a AS (UPDATE agg SET version = version + 1 WHERE key = 'k' || :k RETURNING key, version) SELECT pgoutbox.send('agg', a.key, 'agg.changed', jsonb_build_object('v', a.version, 't', extract(epoch FROM clock_timestamp()))) FROM a;
SQL
RELAY_URL3=$(url 2)
if [ "$HOW" = stall ]; then
	python3 "$ROOT/tests/tcp_proxy.py" "${PORTS[2]}" "$TMP/proxy.port" &
	PROXY=$!
	PIDS+=("$PROXY")
	for _ in $(seq 100); do [ -s "$TMP/proxy.port" ] && break; sleep 0.1; done
	RELAY_URL3="host=127.0.0.1 port=$(cat "$TMP/proxy.port") user=postgres dbname=shard"
fi
OUT=$TMP/arrivals
# The databases are named db1, db2, db3 (their dbnames alike).
mkfifo "$TMP/pipe"
python3 "$ROOT/bench/fleet_outage.py" read "$OUT" <"$TMP/pipe" &
READER=$!
PIDS+=("$READER")
PGOUTBOX_RELAY_STATS_INTERVAL=0 PGOUTBOX_RELAY_RECONNECT_MAX=1s \
	"$PGO" relay --sink stdout --mode ordered \
	--db "$(url 0)" --db "$(url 1)" --db "$RELAY_URL3" >"$TMP/pipe" 2>"$RLOG" &
RELAY=$!
PIDS+=("$RELAY")
producer() { # shard index, seconds
	pgbench -n -f "$TMP/produce.sql" -R "$RATE" -c 2 -j 1 -T "$2" "$(url "$1")" \
		>"$TMP/pgbench.$1.$RANDOM.log" 2>&1 &
	PIDS+=("$!")
	PRODS+=("$!")
}
sleep 2 # the relay connected
PRODS=()
now() { date +%s.%N; }
TOTAL=$((UP + DOWN + AFTER))
for i in 0 1 2; do producer "$i" "$TOTAL"; done
t0=$(now)
victim=${PRODS[2]}
sleep "$UP"
t_out=$(now)
echo "   shard 3 down ($HOW) for $DOWN s"
if [ "$HOW" = stop ]; then
	PG_DIR=${DIRS[2]} PG_BIN=$(pg_bindir) pg_as "$(pg_bindir)/pg_ctl" -D "${DIRS[2]}/data" -m immediate -w stop >/dev/null
else
	kill -STOP "$PROXY"
fi
sleep "$DOWN"
if [ "$HOW" = stop ]; then
	PG_DIR=${DIRS[2]} PG_PORT=${PORTS[2]} PG_OPTS=${OPTS[2]} PG_BIN=$(pg_bindir) pg_start_again
	t_back=$(now)
	wait "$victim" 2>/dev/null || true # it lost its server
	producer 2 "$AFTER"
else
	kill -CONT "$PROXY"
	t_back=$(now)
fi
echo "   shard 3 back"
for p in "${PRODS[@]}"; do wait "$p" 2>/dev/null || true; done
t_end=$(now)
for i in 0 1 2; do
	for _ in $(seq 1200); do
		[ "$(psql -XAtq "$(url "$i")" -c "SELECT count(*) FROM pgoutbox.outbox")" = 0 ] && break
		sleep 0.1
	done
done
kill -TERM "$RELAY" 2>/dev/null
wait "$RELAY" 2>/dev/null || true
wait "$READER" 2>/dev/null || true
rc=0
for i in 0 1 2; do
	grep -F "\"pgoutbox-source\": \"db$((i + 1))\"}" "$OUT" | cut -d' ' -f2- >"$TMP/out.$i" || true
	python3 "$ROOT/tests/order_check.py" "$TMP/out.$i" "$(url "$i")" >"$TMP/check.$i" || rc=1
	echo "   db$((i + 1)): $(head -1 "$TMP/check.$i")"
done
PARAMS=$(printf '{"variant": "%s", "how": "%s", "rate": %s, "up": %s, "down": %s, "after": %s, "shards": 3}' \
	"${LABEL:-fleet outage}" "$HOW" "$RATE" "$UP" "$DOWN" "$AFTER")
python3 "$ROOT/bench/fleet_outage.py" report "$OUT" "$t_out" "$t_back" \
	"$(awk "BEGIN { printf \"%.6f\", $t0 + 5 }")" "$t_end" \
	${JSON:+--json "$JSON"} --run-id "$RUN_ID" --params "$PARAMS" \
	--machine "$(nproc) cores" | sed 's/^/   /' || rc=1
exit $rc
