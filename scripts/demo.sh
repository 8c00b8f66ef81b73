#!/usr/bin/env bash
# demo.sh [--db URL] [--bin PATH] — shows pgoutbox end to end: migrate, a
# relay, a producer writing orders and their events in one transaction
# (one of them rolled back), events flowing to the relay's stdout sink,
# `pgoutbox status`, and a clean SIGTERM.  Without --db (or DATABASE_URL)
# it starts a throwaway PostgreSQL cluster under /tmp and removes it after;
# a database given is never stopped, and the demo can run there again.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pg.sh

BIN=build/pgoutbox
DB=${DATABASE_URL:-}
while [ $# -gt 0 ]; do
	case $1 in
	--db) DB=$2; shift 2 ;;
	--db=*) DB=${1#--db=}; shift ;;
	--bin) BIN=$2; shift 2 ;;
	-h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "demo.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done
[ -x "$BIN" ] || { echo "demo.sh: $BIN is not built; run 'make demo'" >&2; exit 2; }

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
TMP=$(mktemp -d /tmp/pgoutbox-demo.XXXXXX)
chmod 755 "$TMP"
RELAY=
OWN_PG=
# pg.sh's variables name the cluster to stop: only ever the demo's own
# (a PG_DIR or PG_PORT in the caller's environment is not ours).
unset PG_DIR PG_PORT PG_BIN PG_URL PG_OPTS
cleanup() {
	[ -n "$RELAY" ] && kill -9 "$RELAY" 2>/dev/null || true
	[ -n "$OWN_PG" ] && pg_stop
	rm -rf "$TMP"
}
trap cleanup EXIT

if [ -z "$DB" ]; then
	step "starting a throwaway PostgreSQL in $TMP/pg"
	OWN_PG=1
	pg_start "$TMP/pg"
	psql -XAtq "$PG_URL" -c "CREATE DATABASE demo"
	DB=$(pg_url demo)
	echo "database: $DB"
else
	step "using the database given: $(sed -E 's#(://[^:/@]*:)[^@]*@#\1***@#; s#password=[^ ]*#password=***#' <<<"$DB")"
fi
export DATABASE_URL=$DB
psql_() { psql -XAtq -v ON_ERROR_STOP=1 "$DB" "$@"; }

step "pgoutbox migrate (twice: it is idempotent)"
"$BIN" migrate
"$BIN" migrate

step "starting the relay: pgoutbox relay --sink stdout (NDJSON on stdout, logs on stderr)"
"$BIN" relay --sink stdout --name demo --batch 100 &
RELAY=$!
sleep 0.5

step "a service writes an order and its event in ONE transaction"
psql_ <<'SQL'
CREATE TABLE IF NOT EXISTS pgoutbox_demo_orders (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, customer text, total numeric);
BEGIN;
WITH o AS (INSERT INTO pgoutbox_demo_orders (customer, total) VALUES ('ada', 42.50) RETURNING *)
SELECT pgoutbox.send('orders', o.id::text, 'order.created',
                     jsonb_build_object('order_id', o.id, 'customer', o.customer, 'total', o.total),
                     '{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}')
FROM o;
COMMIT;
SQL
sleep 0.3

step "a transaction that rolls back: its event is never relayed"
psql_ <<'SQL'
BEGIN;
WITH o AS (INSERT INTO pgoutbox_demo_orders (customer, total) VALUES ('bob', 10) RETURNING id)
SELECT pgoutbox.send('orders', o.id::text, 'order.created', jsonb_build_object('order_id', o.id)) FROM o;
ROLLBACK;
SQL
sleep 0.3
echo "(nothing above: bob's order was rolled back)"

step "100 orders in 100 transactions, as a busy service would write them"
for i in $(seq 3 102); do
	echo "BEGIN; WITH o AS (INSERT INTO pgoutbox_demo_orders (customer, total) VALUES ('c$i', $i) RETURNING id) SELECT pgoutbox.send('orders', o.id::text, 'order.created', jsonb_build_object('order_id', o.id)) FROM o; COMMIT;"
done | psql_ >/dev/null &
wait $!
sleep 0.5

step "pgoutbox send from the shell"
"$BIN" send --topic audit --type user.login --key ada '{"user": "ada", "ip": "127.0.0.1"}'
sleep 0.3

step "pgoutbox status"
"$BIN" status

step "SIGTERM: the relay finishes what it has in flight and exits 0"
kill -TERM "$RELAY"
rc=0; wait "$RELAY" || rc=$?
RELAY=
echo "relay exit code: $rc"
left=$(psql_ -c "SELECT count(*) FROM pgoutbox.outbox")
echo "events still pending: $left"
[ "$rc" = 0 ] && [ "$left" = 0 ]
step "done: 102 events relayed, the rolled-back one never"
