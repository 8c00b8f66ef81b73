# An adopted table through a broker sink: article 003's consumers.outbox
# relayed in ordered mode into Redis Streams; every event arrives once
# with the event id as the entry's id field, in per-chat order, and every
# row is marked sent.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../redis.sh"
trap 'cleanup_pids; redis_stop' EXIT
redis_start "$T_TMP/redis"
t_db
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<'SQL'
CREATE SCHEMA consumers;
CREATE TABLE consumers.outbox (
  id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  event      text        NOT NULL,
  payload    jsonb       NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  sent_at    timestamptz
);
CREATE INDEX outbox_unsent ON consumers.outbox (id) WHERE sent_at IS NULL;
INSERT INTO consumers.outbox (event, payload)
SELECT 'message.created', jsonb_build_object('chat_id', i % 10, 'n', i) FROM generate_series(1, 1000) i;
SQL
"$PGO_BIN" adopt consumers.outbox --name chat --topic "'chat-messages'" --key "payload->>'chat_id'" --type event \
	--created-at created_at --pending 'sent_at IS NULL' --done 'sent_at = now()' --channel consumers_outbox \
	>"$T_TMP/adopt" 2>&1 || fail "adopt: $(cat "$T_TMP/adopt")"
start_relay "$T_TMP/relay" --queue chat --sink redis --redis "redis://127.0.0.1:$REDIS_PORT" --redis-stream '{topic}' --batch 100
wait_until 60 '[ "$(q "SELECT count(*) FROM consumers.outbox WHERE sent_at IS NULL")" = 0 ]'
stop_relay "$RELAY_PID"
[ "$(rcli XLEN chat-messages)" = 1000 ] || fail "stream length $(rcli XLEN chat-messages)"
# Entry field pairs: id then its value; the event ids in stream order.
rcli --raw XRANGE chat-messages - + | awk 'prev == "id" { print } { prev = $0 }' >"$T_TMP/ids"
[ "$(sort -u "$T_TMP/ids" | wc -l)" = 1000 ] || fail "distinct ids in the stream: $(sort -u "$T_TMP/ids" | wc -l)"
# Per chat (id % 10), the ids in the stream increase.
awk '{ k = $1 % 10; if ($1 <= last[k]) { print "chat " k ": " $1 " after " last[k]; bad = 1 } last[k] = $1 } END { exit bad }' "$T_TMP/ids" ||
	fail "per-key order broken in the stream"
true
