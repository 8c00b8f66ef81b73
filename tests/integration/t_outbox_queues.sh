# Several services in one database, each with an outbox of its own (seed
# 003's layout: Consumers and Workers, each with its relay): `queue create
# --kind outbox` makes the queues, a producer role that may only EXECUTE
# pgoutbox.send_to writes each (SQL, in its own transaction with other
# work, and `pgoutbox send --queue`), and two relays, each under a role
# that may touch only its own queue and each with its own sink (and its
# own mode: the mode check is per queue), deliver every event to its own
# sink and none to the other's.  A queue that does not exist, or is a work
# queue, is refused with a clear error and nothing is written.
. "$(dirname "$0")/../lib.sh"
t_db
"$PGO_BIN" queue create --kind outbox consumers --shards 16 >"$T_TMP/create.out" || fail "queue create --kind outbox"
grep -qx 'outbox queue consumers created (table pgoutbox.consumers, 16 shards)' "$T_TMP/create.out" || fail "create: $(cat "$T_TMP/create.out")"
"$PGO_BIN" queue create --kind outbox workers >/dev/null || fail "queue create --kind outbox workers"
"$PGO_BIN" queue create emails >/dev/null || fail "queue create emails"
rc=0; "$PGO_BIN" queue create --kind bogus x 2>"$T_TMP/err" || rc=$?
[ "$rc" = 2 ] && grep -q -- '--kind is work or outbox, not "bogus"' "$T_TMP/err" || fail "--kind bogus: exit $rc: $(cat "$T_TMP/err")"
[ "$(q "SELECT string_agg(name || ':' || kind, ' ' ORDER BY name) FROM pgoutbox.queues")" = \
	"consumers:outbox emails:work outbox:outbox workers:outbox" ] || fail "queues: $(q 'SELECT * FROM pgoutbox.queues')"
"$PGO_BIN" queue list | qgrep '^workers  *outbox ' || fail "queue list: $("$PGO_BIN" queue list)"
rc=0; "$PGO_BIN" queue stats workers 2>"$T_TMP/err" || rc=$?
[ "$rc" != 0 ] && grep -q '"workers" is not a work queue but an outbox (its events: pgoutbox status --queue workers' "$T_TMP/err" ||
	fail "queue stats of an outbox: exit $rc: $(cat "$T_TMP/err")"

P=t_oq_producer
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<SQL
CREATE ROLE $P LOGIN;
GRANT USAGE ON SCHEMA pgoutbox TO $P;
GRANT EXECUTE ON FUNCTION pgoutbox.send_to(text, text, text, text, jsonb, jsonb),
                          pgoutbox.send_batch_to(text, text, text[], text[], jsonb[], jsonb[]),
                          pgoutbox.send_batch_to(text, text[], text[], text[], jsonb[], jsonb[]) TO $P;
CREATE TABLE chat (id serial PRIMARY KEY, body text);
GRANT INSERT ON chat TO $P;
GRANT USAGE ON SEQUENCE chat_id_seq TO $P;
SQL
# Each relay's role: the pgoutbox tables of its own queue only.
for svc in consumers workers; do
	psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<SQL
CREATE ROLE t_oq_$svc LOGIN;
GRANT USAGE ON SCHEMA pgoutbox TO t_oq_$svc;
GRANT SELECT ON pgoutbox.migrations TO t_oq_$svc;
GRANT SELECT, INSERT, UPDATE, DELETE ON pgoutbox.$svc TO t_oq_$svc;
GRANT SELECT, INSERT, UPDATE ON pgoutbox.dead_letters TO t_oq_$svc;
GRANT SELECT ON pgoutbox.shard_leases TO t_oq_$svc;
GRANT SELECT ON pgoutbox.relays, pgoutbox.queues TO t_oq_$svc;
GRANT EXECUTE ON FUNCTION pgoutbox.rebalance(text, text, text, interval),
                          pgoutbox.relay_beat(text, text, text, interval, boolean),
                          pgoutbox.leave(text, text),
                          pgoutbox.unarchive(text, bigint[]),
                          pgoutbox.claim_floor(text, bigint, bigint, text[]),
                          pgoutbox.maintain(), pgoutbox.health(interval, bigint) TO t_oq_$svc;
SQL
done
base=$DATABASE_URL
as() { psql -XAtq -v ON_ERROR_STOP=1 "${base/user=postgres/user=$1}" -c "$2"; }
counts() { q "SELECT (SELECT count(*) FROM pgoutbox.outbox) || ' ' || (SELECT count(*) FROM pgoutbox.consumers) || ' ' || (SELECT count(*) FROM pgoutbox.workers) || ' ' || (SELECT count(*) FROM pgoutbox.emails) || ' ' || (SELECT count(*) FROM chat)"; }

# A wrong queue: a clear error, nothing written.
before=$(counts)
as $P "SELECT pgoutbox.send_to('nosuch', 'chat', 'c1', 'message.created', '{}')" 2>"$T_TMP/err" && fail "send_to a queue that does not exist"
grep -q 'no outbox queue named "nosuch"' "$T_TMP/err" || fail "send_to nosuch: $(cat "$T_TMP/err")"
grep -q "pgoutbox queue create --kind outbox nosuch" "$T_TMP/err" || fail "send_to nosuch says not what to do: $(cat "$T_TMP/err")"
as $P "SELECT pgoutbox.send_to('emails', 'chat', 'c1', 'message.created', '{}')" 2>"$T_TMP/err" && fail "send_to a work queue"
grep -q 'queue "emails" is a work queue, not an outbox' "$T_TMP/err" || fail "send_to emails: $(cat "$T_TMP/err")"
as $P "SELECT pgoutbox.send_batch_to('nosuch', 'chat', NULL, NULL, ARRAY['{}']::jsonb[])" 2>"$T_TMP/err" && fail "send_batch_to a queue that does not exist"
grep -q 'pgoutbox.send_batch_to: no outbox queue named "nosuch"' "$T_TMP/err" || fail "send_batch_to nosuch: $(cat "$T_TMP/err")"
# A bad element: nothing of the batch, not even the good ones before it.
as $P "SELECT pgoutbox.send_batch_to('workers', 'chat', NULL, NULL, ARRAY['{\"from\": \"workers\"}', NULL]::jsonb[])" 2>"$T_TMP/err" &&
	fail "send_batch_to with a NULL payload"
grep -q 'payloads\[2\] is NULL' "$T_TMP/err" || fail "send_batch_to NULL payload: $(cat "$T_TMP/err")"
# In a transaction with a business row: the row goes too.
psql -XAtq "${base/user=postgres/user=$P}" >/dev/null 2>"$T_TMP/err" <<'SQL'
BEGIN;
INSERT INTO chat (body) VALUES ('lost');
SELECT pgoutbox.send_to('consumers', 'chat', 'c1', 'message.created', '{"from": "consumers"}');
SELECT pgoutbox.send_to('nosuch', 'chat', 'c1', 'message.created', '{}');
COMMIT;
SQL
for argv in "--queue nosuch" "--queue emails" "--queue outbox"; do
	rc=0
	# shellcheck disable=SC2086
	"$PGO_BIN" send --db "${base/user=postgres/user=$P}" $argv --topic chat '{}' >"$T_TMP/out" 2>"$T_TMP/err" || rc=$?
	case $argv in
	*nosuch) [ "$rc" = 2 ] && grep -q 'no outbox queue named "nosuch"' "$T_TMP/err" || fail "send $argv: exit $rc: $(cat "$T_TMP/err")" ;;
	*emails) [ "$rc" = 2 ] && grep -q 'queue "emails" is a work queue' "$T_TMP/err" || fail "send $argv: exit $rc: $(cat "$T_TMP/err")" ;;
	# The producer was granted send_to, not send(): the outbox is not its.
	*outbox) [ "$rc" = 1 ] && grep -q 'permission denied for function send' "$T_TMP/err" || fail "send $argv: exit $rc: $(cat "$T_TMP/err")" ;;
	esac
	[ ! -s "$T_TMP/out" ] || fail "send $argv printed an id: $(cat "$T_TMP/out")"
done
[ "$(counts)" = "$before" ] || fail "a refused send wrote something: $before -> $(counts)"

# The two relays, each as its own role, with its own sink and mode; a
# fallback poll longer than the test, so each queue's wake-up (its
# trigger, the outbox's, and the relay's sleeper lock) must work.
DATABASE_URL=${base/user=postgres/user=t_oq_consumers} start_relay "$T_TMP/consumers.ndjson" --queue consumers --name consumers-relay --sink stdout --poll-interval 60s
RC=$RELAY_PID
DATABASE_URL=${base/user=postgres/user=t_oq_workers} start_relay "$T_TMP/workers.ndjson" --queue workers --name workers-relay --mode concurrent --sink stdout --poll-interval 60s
RW=$RELAY_PID
wait_until 20 '[ "$(q "SELECT count(*) FROM pgoutbox.relays")" = 3 ]'
for i in $(seq 1 20); do
	as $P "SELECT pgoutbox.send_to('consumers', 'chat', 'chat-$((i % 3))', 'message.created', '{\"from\": \"consumers\", \"n\": $i}')" >/dev/null
	[ "$i" -le 15 ] && as $P "SELECT pgoutbox.send_to('workers', 'chat', 'chat-$((i % 3))', 'message.shown', '{\"from\": \"workers\", \"n\": $i}', '{\"traceparent\": \"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\"}')" >/dev/null
done
# A batch into each (one topic; one topic per event), ids in input order.
ids=$(as $P "SELECT pgoutbox.send_batch_to('consumers', 'chat', ARRAY['chat-1', 'chat-2'], NULL,
	ARRAY['{\"from\": \"consumers\", \"n\": 23}', '{\"from\": \"consumers\", \"n\": 24}']::jsonb[])") || fail "send_batch_to consumers"
as $P "SELECT pgoutbox.send_batch_to('workers', ARRAY['chat', 'chat'], NULL, ARRAY['message.shown', 'message.shown'],
	ARRAY['{\"from\": \"workers\", \"n\": 18}', '{\"from\": \"workers\", \"n\": 19}']::jsonb[])" >/dev/null || fail "send_batch_to workers"
# Both queues and a business row in one transaction.
psql -XAtq -v ON_ERROR_STOP=1 "${base/user=postgres/user=$P}" >/dev/null <<'SQL'
BEGIN;
INSERT INTO chat (body) VALUES ('hi');
SELECT pgoutbox.send_to('consumers', 'chat', 'chat-0', 'message.created', '{"from": "consumers", "n": 21}');
SELECT pgoutbox.send_to('workers', 'chat', 'chat-0', 'message.shown', '{"from": "workers", "n": 16}');
COMMIT;
SQL
# The CLI as the same producer: through send_to.
"$PGO_BIN" send --db "${base/user=postgres/user=$P}" --queue workers --topic chat --key chat-1 --type message.shown \
	'{"from": "workers", "n": 17}' >"$T_TMP/id" 2>"$T_TMP/err" || fail "pgoutbox send --queue workers: $(cat "$T_TMP/err")"
# A producer that may write only its own service's outbox: INSERT on
# its table (and the id it gets back), no send_to.
P2=t_oq_consumers_only
q "CREATE ROLE $P2 LOGIN; GRANT USAGE ON SCHEMA pgoutbox TO $P2; GRANT INSERT, SELECT (id) ON pgoutbox.consumers TO $P2; GRANT USAGE ON SEQUENCE pgoutbox.consumers_id_seq TO $P2" >/dev/null
"$PGO_BIN" send --db "${base/user=postgres/user=$P2}" --queue consumers --topic chat --key chat-2 --type message.created \
	'{"from": "consumers", "n": 22}' >/dev/null 2>"$T_TMP/err" || fail "send --queue consumers with INSERT only: $(cat "$T_TMP/err")"
rc=0; "$PGO_BIN" send --db "${base/user=postgres/user=$P2}" --queue workers --topic chat '{"from": "consumers"}' >/dev/null 2>"$T_TMP/err" || rc=$?
[ "$rc" = 1 ] && grep -q 'permission denied' "$T_TMP/err" || fail "a consumers-only producer wrote the workers' outbox: exit $rc: $(cat "$T_TMP/err")"
as $P2 "SELECT payload FROM pgoutbox.consumers" 2>/dev/null && fail "a producer can read the payloads"
[ "$(q "SELECT count(*) FROM pgoutbox.outbox")" = 0 ] || fail "events went into the default outbox"
wait_until 30 '[ "$(q "SELECT count(*) FROM pgoutbox.consumers") $(q "SELECT count(*) FROM pgoutbox.workers")" = "0 0" ]'
wait_until 10 '[ "$(grep -c "" "$T_TMP/consumers.ndjson")" -ge 24 ] && [ "$(grep -c "" "$T_TMP/workers.ndjson")" -ge 19 ]'
python3 - "$T_TMP/consumers.ndjson" consumers 24 "$T_TMP/workers.ndjson" workers 19 "$ids" <<'PY' || fail "the sinks got the wrong events"
import json, sys
batch = [int(x) for x in sys.argv[7].strip("{}").split(",")]
got = {json.loads(l)["payload"]["n"]: json.loads(l)["id"] for l in open(sys.argv[1])}
assert [got[23], got[24]] == batch, ("send_batch_to's ids", batch, got)
for path, svc, n in ((sys.argv[1], sys.argv[2], int(sys.argv[3])), (sys.argv[4], sys.argv[5], int(sys.argv[6]))):
    evs = [json.loads(l) for l in open(path)]
    assert all(e["payload"]["from"] == svc for e in evs), (path, [e for e in evs if e["payload"]["from"] != svc])
    assert sorted({e["payload"]["n"] for e in evs}) == list(range(1, n + 1)), (path, sorted(e["payload"]["n"] for e in evs))
    assert all(e["queue"] == svc for e in evs if "queue" in e), path
PY
grep -q '"traceparent": "00-0af7651916cd43dd8448eb211c80319c' "$T_TMP/workers.ndjson" || fail "headers did not travel: $(head -2 "$T_TMP/workers.ndjson")"
# Each service's status: its queue, its relay and its mode.
"$PGO_BIN" status --queue consumers >"$T_TMP/status" || fail "status --queue consumers"
grep -q '^  relays: 1 (ordered)$' "$T_TMP/status" || fail "status consumers (one process, two connections): $(cat "$T_TMP/status")"
"$PGO_BIN" status --queue workers >"$T_TMP/status" || fail "status --queue workers"
grep -q 'workers-relay/0 *concurrent' "$T_TMP/status" || fail "status workers: $(cat "$T_TMP/status")"
grep -q 'modes mixed' "$T_TMP/status" && fail "modes of two queues mixed up: $(cat "$T_TMP/status")"
for f in consumers workers; do
	grep -q 'permission denied' "$T_TMP/$f.ndjson.log" && fail "$f relay: $(grep permission "$T_TMP/$f.ndjson.log")"
done
stop_relay "$RC"
stop_relay "$RW"
true
