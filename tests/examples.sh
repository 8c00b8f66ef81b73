# examples.sh — sourced by tests/integration/t_examples_<lang>.sh: runs a
# language's producer and consumer (examples/<lang>/, docs/examples.md)
# against a fresh database and a relay (issue 43).
#   examples_run PRODUCER CONSUMER
# Both are sh -c command lines, with DATABASE_URL set to a postgresql://
# URL.  The producer
# writes orders 1-4 and their events (one send, one send_batch of three);
# the relay's exec sink hands the events to the consumer as NDJSON on
# stdin, which must ship each order once; the same events again (a
# redelivery) must change nothing.  Fails if an event does not arrive.
EXAMPLES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../examples" && pwd)

examples_run() {
	local producer=$1 consumer=$2 got
	t_db
	# A URL over TCP, which every driver reads (JDBC has no Unix sockets).
	DATABASE_URL="postgresql://postgres@127.0.0.1:$PG_PORT/$(basename "$0" .sh)"
	psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" -f "$EXAMPLES_DIR/orders.sql" >/dev/null || fail "examples/orders.sql"
	"$PGO_BIN" inbox maintain >/dev/null 2>"$T_TMP/inbox.log" || fail "inbox maintain: $(cat "$T_TMP/inbox.log")"

	sh -c "$producer" >"$T_TMP/producer.out" 2>&1 || fail "the producer failed: $(tail -20 "$T_TMP/producer.out")"
	[ "$(q 'SELECT string_agg(id::text, $$ $$ ORDER BY id) FROM orders')" = "1 2 3 4" ] ||
		fail "orders after the producer: $(q 'SELECT string_agg(id::text, $$ $$ ORDER BY id) FROM orders')"
	got=$(q "SELECT string_agg(key || ':' || type || ':' || (payload->>'order_id'), ' ' ORDER BY id) FROM pgoutbox.outbox WHERE topic = 'orders'")
	[ "$got" = "1:order.created:1 2:order.created:2 3:order.created:3 4:order.created:4" ] ||
		fail "the outbox after the producer: $got"

	# The relay withholds DATABASE_URL from what it runs: the command
	# names it.
	start_relay "$T_TMP/relay" --sink exec --exec "tee -a '$T_TMP/delivered.ndjson' | DATABASE_URL='$DATABASE_URL' $consumer"
	wait_until 60 '[ "$(q "SELECT count(*) FROM shipments")" -ge 4 ] || ! kill -0 $RELAY_PID'
	wait_until 20 '[ "$(pending)" = 0 ]'
	stop_relay "$RELAY_PID"
	[ "$(q 'SELECT string_agg(order_id::text, $$ $$ ORDER BY order_id) FROM shipments')" = "1 2 3 4" ] ||
		fail "shipments after the relay: $(q 'SELECT string_agg(order_id::text, $$ $$ ORDER BY order_id) FROM shipments'); relay log: $(tail -5 "$T_TMP/relay.log")"
	[ "$(wc -l <"$T_TMP/delivered.ndjson")" -ge 4 ] || fail "the consumer was handed $(wc -l <"$T_TMP/delivered.ndjson") events"

	# A redelivery: the inbox drops every event, nothing is shipped twice
	# (shipments' primary key would fail the consumer).
	sh -c "$consumer" <"$T_TMP/delivered.ndjson" >"$T_TMP/again.out" 2>&1 || fail "the consumer failed on a redelivery: $(tail -20 "$T_TMP/again.out")"
	[ "$(q 'SELECT count(*) FROM shipments')" = 4 ] || fail "a redelivery shipped again"
	[ "$(q "SELECT count(*) FROM pgoutbox.inbox WHERE consumer = 'shipping'")" = 4 ] || fail "inbox claims: $(q "SELECT count(*) FROM pgoutbox.inbox WHERE consumer = 'shipping'")"
	note "4 orders, 4 events relayed, 4 shipments; a redelivery changed nothing"
}
