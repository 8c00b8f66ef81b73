# The rights a relay needs on an adopted table (docs/adopt.md), and
# retries and dead letters of an adopted table: a relay role with only
# those grants relays article 003's consumers.outbox in ordered mode;
# event 2 is retried until it is dead-lettered, event 3 is rejected at
# once; both stay unsent in the application's table (sent_at NULL: the
# table changes only by --done) and go to pgoutbox.dead_letters; the role
# reads no other table of the application.
. "$(dirname "$0")/../lib.sh"
t_db
R=t_adopt_roles_relay
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<SQL
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
INSERT INTO consumers.messages (chat_id, body) SELECT i, 'hi' FROM generate_series(1, 5) i;
INSERT INTO consumers.outbox (event, payload)
SELECT 'message.created', jsonb_build_object('chat_id', i, 'body', 'hi') FROM generate_series(1, 5) i;
-- The relay role of docs/adopt.md.
CREATE ROLE $R LOGIN;
GRANT USAGE ON SCHEMA pgoutbox TO $R;
GRANT SELECT ON pgoutbox.migrations, pgoutbox.shard_leases TO $R;
GRANT SELECT, INSERT, UPDATE, DELETE ON pgoutbox.adopted_state TO $R;
GRANT SELECT, INSERT, UPDATE ON pgoutbox.dead_letters TO $R;
GRANT EXECUTE ON FUNCTION pgoutbox.rebalance(text, text, text, interval),
                          pgoutbox.relay_beat(text, text, text, interval, boolean),
                          pgoutbox.leave(text, text),
                          pgoutbox.maintain(), pgoutbox.health(interval, bigint) TO $R;
GRANT USAGE ON SCHEMA consumers TO $R;
GRANT SELECT, UPDATE (sent_at) ON consumers.outbox TO $R;
SQL
"$PGO_BIN" adopt consumers.outbox --name chat --topic "'chat-messages'" --key "payload->>'chat_id'" --type event \
	--created-at created_at --pending 'sent_at IS NULL' --done 'sent_at = now()' --channel consumers_outbox \
	>"$T_TMP/adopt" 2>&1 || fail "adopt: $(cat "$T_TMP/adopt")"
base=$DATABASE_URL
as() { psql -XAtq -v ON_ERROR_STOP=1 "${base/user=postgres/user=$R}" -c "$1"; }
as "SELECT count(*) FROM consumers.messages" 2>/dev/null && fail "the relay role reads the application's other tables"
as "DELETE FROM consumers.outbox" 2>/dev/null && fail "the relay role may delete from the outbox it only marks"
as "UPDATE consumers.outbox SET payload = '{}'" 2>/dev/null && fail "the relay role may change payloads"
cat >"$T_TMP/sink.sh" <<'SH'
#!/bin/sh
cat >>"$(dirname "$0")/all"
echo "retry 2 try later"
echo "dead 3 rejected"
SH
chmod +x "$T_TMP/sink.sh"
export DATABASE_URL=${base/user=postgres/user=$R}
start_relay "$T_TMP/out" --queue chat --sink exec --exec "$T_TMP/sink.sh" --max-attempts 2 --poll-interval 60s
export DATABASE_URL=$base
wait_until 30 '[ "$(q "SELECT count(*) FROM pgoutbox.dead_letters WHERE queue = '"'chat'"'")" = 2 ]'
wait_until 10 '[ "$(q "SELECT count(*) FROM consumers.outbox WHERE sent_at IS NOT NULL")" = 3 ]'
# The application's NOTIFY wakes the relay (the poll is a minute away).
t0=$(date +%s%N)
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<'SQL'
BEGIN;
INSERT INTO consumers.outbox (event, payload) VALUES ('message.created', '{"chat_id": 6, "body": "late"}');
NOTIFY consumers_outbox;
COMMIT;
SQL
wait_until 10 '[ "$(q "SELECT count(*) FROM consumers.outbox WHERE sent_at IS NOT NULL")" = 4 ]'
note "an event with the application's NOTIFY was sent after $((($(date +%s%N) - t0) / 1000000)) ms (poll interval 60 s)"
stop_relay "$RELAY_PID"
"$PGO_BIN" status --queue chat >"$T_TMP/status" 2>&1 || fail "status: $(cat "$T_TMP/status")"
grep -q 'pending: none' "$T_TMP/status" && grep -q 'dead letters: 2' "$T_TMP/status" || fail "status: $(cat "$T_TMP/status")"
grep -q 'permission denied' "$T_TMP/out.log" && fail "the relay hit a permission error: $(grep permission "$T_TMP/out.log")"
[ "$(q "SELECT string_agg(id::text, ' ' ORDER BY id) FROM consumers.outbox WHERE sent_at IS NULL")" = "2 3" ] ||
	fail "unsent rows: $(q 'SELECT id, sent_at FROM consumers.outbox ORDER BY id')"
[ "$(q "SELECT string_agg(id || ':' || attempts, ' ' ORDER BY id) FROM pgoutbox.dead_letters WHERE queue = 'chat'")" = "2:2 3:1" ] ||
	fail "dead letters: $(q 'SELECT * FROM pgoutbox.dead_letters')"
[ "$(q "SELECT string_agg(id || ':' || dead, ' ' ORDER BY id) FROM pgoutbox.adopted_state WHERE queue = 'chat'")" = "2:true 3:true" ] ||
	fail "state: $(q 'SELECT * FROM pgoutbox.adopted_state')"
# Event 2 was delivered twice (a retry), the others once.
[ "$(grep -o '"id":[0-9]*' "$T_TMP/all" | sort | uniq -c | awk '{print $2 "x" $1}' | tr '\n' ' ')" = '"id":1x1 "id":2x2 "id":3x1 "id":4x1 "id":5x1 "id":6x1 ' ] ||
	fail "deliveries: $(grep -o '"id":[0-9]*' "$T_TMP/all" | sort | uniq -c)"
true
