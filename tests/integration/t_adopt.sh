# pgoutbox adopt: the outbox tables applications already have, created and
# written by SQL that knows nothing of pgoutbox, relayed in concurrent
# mode: the seed articles' outbox_events (status PENDING/PUBLISHED, their
# row trigger on outbox_channel), consumers.outbox (sent_at, the
# application's own NOTIFY consumers_outbox) and Debezium's outbox (a
# uuid id, rows deleted once sent).  Per shape: a backlog adopted, then
# live writes; every event delivered once, marked or deleted; with a poll
# interval of a minute, live events arrive through the wake-up (the
# application's channel for consumers.outbox); unadopt leaves the table
# as pg_dump saw it before adopt.
. "$(dirname "$0")/../lib.sh"
t_db
PG_DUMP=$(pg_bindir)/pg_dump
# (pg_dump 15.14+ writes a random \restrict token.)
dump() { "$PG_DUMP" --schema-only --no-owner -t "$1" "$DATABASE_URL" | grep -Ev '^\\(un)?restrict '; }

psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<'SQL'
-- Articles 000/001.
CREATE TABLE outbox_events (
    id           bigserial PRIMARY KEY,
    aggregate_id text NOT NULL,
    event_type   text NOT NULL,
    payload      jsonb NOT NULL,
    status       text NOT NULL DEFAULT 'PENDING',
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE OR REPLACE FUNCTION notify_outbox_event()
RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('outbox_channel', NEW.id::text);
  RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER outbox_event_trigger
AFTER INSERT ON outbox_events
FOR EACH ROW
EXECUTE FUNCTION notify_outbox_event();
-- Article 003.
CREATE SCHEMA consumers;
CREATE TABLE consumers.messages (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, chat_id bigint NOT NULL, body text NOT NULL);
CREATE TABLE consumers.outbox (
  id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  event      text        NOT NULL,
  payload    jsonb       NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  sent_at    timestamptz
);
CREATE INDEX outbox_unsent ON consumers.outbox (id) WHERE sent_at IS NULL;
-- Debezium's outbox event router.
CREATE TABLE outbox (
  id            uuid         NOT NULL PRIMARY KEY,
  aggregatetype varchar(255) NOT NULL,
  aggregateid   varchar(255) NOT NULL,
  type          varchar(255) NOT NULL,
  payload       jsonb
);
-- The applications' writes, one transaction each.
CREATE PROCEDURE write_events(shape text, n int) LANGUAGE plpgsql AS $$
DECLARE
    m record;
BEGIN
    FOR i IN 1..n LOOP
        IF shape = 'events' THEN
            INSERT INTO outbox_events (aggregate_id, event_type, payload)
            VALUES ('user-' || (i % 7), 'UserUpdated', jsonb_build_object('n', i));
        ELSIF shape = 'chat' THEN
            INSERT INTO consumers.messages (chat_id, body) VALUES (i % 5, 'hi ' || i)
            RETURNING id, chat_id, body INTO m;
            INSERT INTO consumers.outbox (event, payload)
            VALUES ('message.created', jsonb_build_object('id', gen_random_uuid(), 'chat_id', m.chat_id, 'body', m.body));
            NOTIFY consumers_outbox;
        ELSE
            INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
            VALUES (gen_random_uuid(), 'order', 'order-' || (i % 9), 'OrderCreated', jsonb_build_object('n', i));
        END IF;
        COMMIT;
    END LOOP;
END $$;
SQL

# shape name table "adopt flags" "pending rows SQL" "done rows SQL"
run_shape() {
	local shape=$1 name=$2 tbl=$3 flags=$4 pending_sql=$5 done_sql=$6 out=$T_TMP/$2
	q "CALL write_events('$shape', 300)"
	dump "$tbl" >"$T_TMP/$name.before"
	eval "\"\$PGO_BIN\" adopt $tbl --name $name $flags" >"$T_TMP/$name.adopt" 2>&1 ||
		fail "adopt $tbl: $(cat "$T_TMP/$name.adopt")"
	note "adopt $tbl: $(tr '\n' ';' <"$T_TMP/$name.adopt")"
	"$PGO_BIN" status --queue "$name" >"$T_TMP/$name.status" 2>&1 || fail "status: $(cat "$T_TMP/$name.status")"
	grep -Eq '^  [^ ]+ +300 ' "$T_TMP/$name.status" || fail "status of $name does not show the backlog: $(cat "$T_TMP/$name.status")"
	# queue list reads the table through the map, beside the other queues.
	"$PGO_BIN" queue list >"$T_TMP/$name.list" 2>&1 || fail "queue list with $name adopted: $(cat "$T_TMP/$name.list")"
	grep -Eq "^$name +adopted +300 +- +0 " "$T_TMP/$name.list" || fail "queue list does not show $name as adopted with its backlog: $(cat "$T_TMP/$name.list")"
	grep -Eq '^outbox +outbox ' "$T_TMP/$name.list" || fail "queue list lost the outbox: $(cat "$T_TMP/$name.list")"
	start_relay "$out" --queue "$name" --mode concurrent --sink stdout --poll-interval 60s --in-flight 2 --log-level debug
	wait_until 30 "[ \"\$(q \"$pending_sql\")\" = 0 ]"
	[ "$(ids_of "$out" | wc -l)" = 300 ] || fail "$name: backlog: $(ids_of "$out" | wc -l) deliveries of 300"
	# Live writes: the fallback poll is a minute away.
	q "CALL write_events('$shape', 200)"
	wait_until 20 "[ \"\$(q \"$pending_sql\")\" = 0 ]"
	wait_until 10 "[ \$(ids_of '$out' | wc -l) -ge 500 ]"
	# One more, timed: the wake-up, not the poll.
	local t0 ms
	t0=$(date +%s%N)
	q "CALL write_events('$shape', 1)"
	wait_until 10 "[ \$(ids_of '$out' | wc -l) -ge 501 ]"
	ms=$((($(date +%s%N) - t0) / 1000000))
	note "$name: a live event arrived in $ms ms (poll interval 60 s)"
	[ "$ms" -lt 3000 ] || fail "$name: a live event took $ms ms: no wake-up"
	stop_relay "$RELAY_PID"
	[ "$(ids_of "$out" | wc -l)" = 501 ] || fail "$name: $(ids_of "$out" | wc -l) deliveries of 501"
	[ -z "$(ids_of "$out" | sort | uniq -d)" ] || fail "$name: events delivered twice: $(ids_of "$out" | sort | uniq -d | head)"
	[ "$(q "$done_sql")" = 501 ] || fail "$name: $(q "$done_sql") rows marked done of 501"
	grep -E "WARN|ERROR" "$out.log" && fail "$name: the relay warned"
	"$PGO_BIN" unadopt "$name" >"$T_TMP/$name.unadopt" 2>&1 || fail "unadopt $name: $(cat "$T_TMP/$name.unadopt")"
	dump "$tbl" >"$T_TMP/$name.after"
	diff "$T_TMP/$name.before" "$T_TMP/$name.after" >&2 || fail "$name: unadopt did not leave $tbl as it was"
	[ "$(q "SELECT count(*) FROM pgoutbox.queues WHERE name = '$name'")$(q "SELECT count(*) FROM pgoutbox.shard_leases WHERE queue = '$name'")" = 00 ] ||
		fail "$name: unadopt left the queue registered"
}

run_shape events events public.outbox_events \
	"--id id --topic \"'user-events'\" --key aggregate_id --type event_type --created-at created_at --pending \"status = 'PENDING'\" --done \"status = 'PUBLISHED'\"" \
	"SELECT count(*) FROM outbox_events WHERE status = 'PENDING'" \
	"SELECT count(*) FROM outbox_events WHERE status = 'PUBLISHED'"
grep -q "index public.pgoutbox_events_pending" "$T_TMP/events.adopt" || fail "adopt did not add the pending index: $(cat "$T_TMP/events.adopt")"
grep -q "trigger pgoutbox_events_notify" "$T_TMP/events.adopt" || fail "adopt did not add the wake-up trigger"
grep -q '"topic":"user-events","key":"user-3","type":"UserUpdated","payload":{"n": ' "$T_TMP/events" ||
	fail "an outbox_events event is not mapped: $(head -1 "$T_TMP/events")"

run_shape chat chat consumers.outbox \
	"--topic \"'chat-messages'\" --key \"payload->>'chat_id'\" --type event --created-at created_at --pending 'sent_at IS NULL' --done 'sent_at = now()' --channel consumers_outbox" \
	"SELECT count(*) FROM consumers.outbox WHERE sent_at IS NULL" \
	"SELECT count(*) FROM consumers.outbox WHERE sent_at IS NOT NULL"
grep -q "index consumers.outbox_unsent already covers" "$T_TMP/chat.adopt" || fail "adopt added an index next to outbox_unsent: $(cat "$T_TMP/chat.adopt")"
grep -q "trigger" "$T_TMP/chat.adopt" && ! grep -q "no trigger" "$T_TMP/chat.adopt" && fail "adopt added a trigger despite --channel"

run_shape debezium debezium public.outbox "" \
	"SELECT count(*) FROM outbox" \
	"SELECT 501 - count(*) FROM outbox"
grep -q "column public.outbox.pgoutbox_seq" "$T_TMP/debezium.adopt" || fail "adopt did not add the event id column for a uuid id"
grep -q '"topic":"order","key":"order-1","type":"OrderCreated",.*"headers":{"outbox_id": "[0-9a-f-]\{36\}"}' "$T_TMP/debezium" ||
	fail "a Debezium event is not mapped: $(head -1 "$T_TMP/debezium")"
true
