#!/usr/bin/env bash
# try.sh kafka|nats [--db URL] [--bin PATH] [--keep] — tries a broker sink
# on this machine without a broker of your own (`make try-kafka`, `make
# try-nats`): starts the broker, a throwaway PostgreSQL under /tmp (or uses
# --db URL), `pgoutbox migrate`, a relay with that sink; sends three events
# with `pgoutbox send` and reads them back with a client the project did not
# write; then stops and removes everything.  --keep leaves it all running
# until Ctrl-C, to send and read more.  Exits 0 when every event arrived.
#   kafka  librdkafka's mock cluster (tests/kafka_mock.c, built with the
#          tests), read with kcat
#   nats   nats-server -js and a stream TRY on try.>, read with the nats npm
#          client (tests/nats/consume.js; npm ci on its first run)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pg.sh

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; }
SINK=
BIN=build/pgoutbox
DB=
KEEP=
while [ $# -gt 0 ]; do
	case $1 in
	kafka|nats) SINK=$1; shift ;;
	--db) DB=$2; shift 2 ;;
	--db=*) DB=${1#--db=}; shift ;;
	--bin) BIN=$2; shift 2 ;;
	--keep) KEEP=1; shift ;;
	-h|--help) usage; exit 0 ;;
	*) echo "try.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done
[ -n "$SINK" ] || { echo "try.sh: which sink? kafka or nats (see --help)" >&2; exit 2; }
[ -x "$BIN" ] || { echo "try.sh: $BIN is not built; run 'make try-$SINK'" >&2; exit 2; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
case $("$BIN" relay --help) in *"--$SINK-"*) ;; *)
	echo "try.sh: $BIN was built without the $SINK sink (meson -D$SINK=enabled)" >&2; exit 2 ;;
esac

# The broker helpers of the tests, and what each needs.
PGO_BIN=$BIN
case $SINK in
kafka)
	. tests/kafka.sh
	[ -x "$KAFKA_MOCK" ] || { echo "try.sh: $KAFKA_MOCK is not built (the tests build it: meson -Dtests=true)" >&2; exit 2; }
	command -v kcat >/dev/null || { echo "try.sh: kcat not found (apt-get install kcat)" >&2; exit 2; }
	;;
nats)
	unset NATS_PORT NATS_URL NATS_USER NATS_PASS NATS_TOKEN NATS_CA
	. tests/nats.sh
	command -v nats-server >/dev/null || { echo "try.sh: nats-server not found (apt-get install nats-server)" >&2; exit 2; }
	;;
esac

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
TMP=$(mktemp -d /tmp/pgoutbox-try.XXXXXX)
chmod 755 "$TMP"
RELAY=
OWN_PG=
SLEEPER=
# pg.sh's variables name the cluster to stop: only ever our own.
unset PG_DIR PG_PORT PG_BIN PG_URL PG_OPTS
cleanup() {
	[ -z "$SLEEPER" ] || kill "$SLEEPER" 2>/dev/null || true
	if [ -n "$RELAY" ]; then
		kill -TERM "$RELAY" 2>/dev/null || true
		wait "$RELAY" 2>/dev/null || true
	fi
	case $SINK in
	kafka) kafka_stop ;;
	nats) nats_stop ;;
	esac
	[ -n "$OWN_PG" ] && pg_stop
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "$DB" ]; then
	step "a throwaway PostgreSQL in $TMP/pg"
	OWN_PG=1
	pg_start "$TMP/pg"
	psql -XAtq "$PG_URL" -c "CREATE DATABASE try"
	DB=$(pg_url try)
fi
export DATABASE_URL=$DB
"$BIN" migrate >/dev/null
# Events of an earlier run on the same --db must not count as ours.
FIRST=$(psql -XAtq "$DB" -c "SELECT coalesce(max(id), 0) + 1 FROM pgoutbox.outbox")

case $SINK in
kafka)
	step "librdkafka's mock cluster: three brokers on 127.0.0.1 ($KAFKA_MOCK)"
	kafka_start "$TMP/kafka"
	echo "bootstrap servers: $KAFKA_BROKERS"
	SINK_ARGS=(--sink kafka --kafka-brokers "$KAFKA_BROKERS" --kafka-topic 'try.{topic}')
	;;
nats)
	step "nats-server -js on 127.0.0.1, a stream TRY capturing try.>"
	nats_start "$TMP/nats"
	echo "server: $NATS_URL"
	js create TRY 'try.>' >/dev/null
	SINK_ARGS=(--sink nats --nats-url "$NATS_URL" --nats-subject 'try.{topic}')
	;;
esac

step "pgoutbox relay ${SINK_ARGS[*]}"
"$BIN" relay "${SINK_ARGS[@]}" --name try 2>"$TMP/relay.log" &
RELAY=$!

step "three events, sent with pgoutbox send"
send() { echo "sent event $("$BIN" send "$@"): ${*: -1}"; }
send --topic orders --key o-1 --type order.created '{"order_id": 1, "total": 42.50}'
send --topic orders --key o-1 --type order.paid \
	--headers '{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}' '{"order_id": 1}'
send --topic orders --key o-2 --type order.created '{"order_id": 2, "total": 7}'
N=3

end=$((SECONDS + 30))
until [ "$(psql -XAtq "$DB" -c "SELECT count(*) FROM pgoutbox.outbox WHERE id >= $FIRST")" = 0 ]; do
	if [ $SECONDS -ge $end ] || ! kill -0 "$RELAY" 2>/dev/null; then
		echo "try.sh: the relay did not publish the events; its log:" >&2
		tail -n 20 "$TMP/relay.log" >&2
		exit 1
	fi
	sleep 0.1
done
echo "relayed: the outbox holds none of them any more"

case $SINK in
kafka)
	step "kcat reads the topic try.orders"
	kcat -C -b "$KAFKA_BROKERS" -t try.orders -e -q \
		-f 'partition %p offset %o key %k headers %h\n  %s\n' | tee "$TMP/read.txt"
	got=$(grep -c '^partition' "$TMP/read.txt" || true)
	READ="kcat -C -b $KAFKA_BROKERS -t try.orders"
	;;
nats)
	step "the nats npm client (tests/nats/consume.js) reads the stream TRY"
	if [ ! -f tests/nats/node_modules/nats/package.json ]; then
		command -v npm >/dev/null || { echo "try.sh: node and npm are needed for the nats npm client (apt-get install npm)" >&2; exit 1; }
		echo "(npm ci in tests/nats, once)"
		(cd tests/nats && npm ci --no-audit --no-fund --silent) >"$TMP/npm.log" 2>&1 ||
			{ cat "$TMP/npm.log" >&2; echo "try.sh: npm ci in tests/nats failed" >&2; exit 1; }
	fi
	node tests/nats/consume.js "$NATS_URL" TRY "$N" | tee "$TMP/read.txt"
	got=$(grep -c '"subject":"try.orders"' "$TMP/read.txt" || true)
	READ="python3 tests/nats_js.py $NATS_PORT dump TRY"
	;;
esac

if [ "$got" != "$N" ]; then
	echo "try.sh: $got of $N events arrived" >&2
	exit 1
fi
step "done: $N events went from PostgreSQL through the relay into $SINK"

if [ -n "$KEEP" ]; then
	cat <<EOF

Everything keeps running until Ctrl-C.  In another shell:
  $BIN send --db '$DB' --topic orders '{"order_id": 3}'
  $READ
EOF
	sleep infinity &
	SLEEPER=$!
	wait "$SLEEPER" || true
fi
