# A queue captured through the WAL (docs/wal.md) into a real nats-server
# (JetStream), read back by the nats npm client, which no one here wrote
# (as t_nats_sink does for table capture): every committed event once,
# none rolled back, on the subject of its topic, the payload as data, the
# headers exact (Nats-Msg-Id = the event id, Pgoutbox-Type, -Key,
# -Created-At, the event's own), per key in id order; a relay killed
# with -9 and started again, and then every event streamed again from a
# copy of the slot, leave no duplicate in the stream (the ids are the
# same in every redelivery: the server's dedup on Nats-Msg-Id drops
# them).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../nats.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
command -v node >/dev/null || fail "node not found (needed for the nats npm client)"
NODE_DIR=$ROOT/tests/nats
if [ ! -f "$NODE_DIR/node_modules/nats/package.json" ]; then
	(cd "$NODE_DIR" && npm ci --no-audit --no-fund --silent) >"$T_TMP/npm.log" 2>&1 ||
		{ cat "$T_TMP/npm.log" >&2; fail "npm ci in tests/nats"; }
fi
unset PG_PORT PG_DIR PG_URL PG_OPTS
pg_start "$T_TMP/pgwal" wal_level=logical max_replication_slots=4 max_wal_senders=4 fsync=off track_commit_timestamp=on ||
	fail "cannot start a cluster with wal_level=logical"
trap 'cleanup_pids; nats_stop; pg_stop' EXIT
nats_start "$T_TMP/nats"
js create WALQ 'app.>'
t_db
"$PGO_BIN" queue create ev --capture wal >/dev/null || fail "queue create --capture wal"

# 3000 events in 30 transactions, a rolled-back one between them; the
# envelope of each kept as the producer saw it.
q "CREATE TABLE expected (id bigint PRIMARY KEY, topic text, key text, type text, payload text, headers text, created_at text)"
send_tx() {
	psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<SQL
BEGIN;
WITH e AS (SELECT i, CASE WHEN i % 3 = 0 THEN 'users' ELSE 'orders' END AS topic,
                  CASE WHEN i % 5 = 0 THEN NULL ELSE 'k' || (i % 17) END AS key,
                  jsonb_build_object('i', i, 'text', 'quote " and ünïcödé ✓') AS payload,
                  CASE WHEN i % 2 = 0 THEN '{}' ELSE jsonb_build_object('traceparent', 'tp-' || i) END AS headers
             FROM generate_series($1 * 100 + 1, $1 * 100 + 100) i),
     ids AS (SELECT pgoutbox.send_batch_to('ev', array_agg(topic ORDER BY i), array_agg(key ORDER BY i),
                                           array_agg('thing.happened'::text ORDER BY i), array_agg(payload ORDER BY i),
                                           array_agg(headers ORDER BY i)) AS a FROM e)
INSERT INTO expected SELECT x.id, e.topic, e.key, 'thing.happened', e.payload::text, e.headers::text, NULL
  FROM ids, unnest(ids.a) WITH ORDINALITY AS x(id, n)
  JOIN e ON e.i = $1 * 100 + x.n;
COMMIT;
SQL
}
N=0
for t in $(seq 0 29); do
	send_tx "$t"
	N=$((N + 100))
	[ "$t" = 10 ] && psql -XAtq "$DATABASE_URL" >/dev/null <<'SQL'
BEGIN;
SELECT pgoutbox.send_to('ev', 'orders', 'k1', 'rolled.back', '{"gone": true}');
ROLLBACK;
SQL
done
# An event's created_at is its transaction's commit time (the relay
# reads it from the stream): that of the row of expected written beside.
q "UPDATE expected SET created_at = to_char(pg_xact_commit_timestamp(xmin) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US')" >/dev/null

# A copy of the slot as it is before any relay: streamed again later.
q "SELECT pg_copy_logical_replication_slot('pgoutbox_ev', 'pgoutbox_ev_again')" >/dev/null
# A relay killed with -9 while it publishes, then one that finishes.
start_relay "$T_TMP/r1" --queue ev --sink nats --nats-url "$NATS_URL" --nats-subject 'app.{queue}.{topic}' --batch 50
wait_until 30 '[ "$(js info WALQ)" -ge 500 ]'
kill -9 "$RELAY_PID"
wait "$RELAY_PID" 2>/dev/null || true
killed_at=$(js info WALQ)
start_relay "$T_TMP/r2" --queue ev --sink nats --nats-url "$NATS_URL" --nats-subject 'app.{queue}.{topic}' --batch 50
wait_until 60 '[ "$(js info WALQ)" -ge "$N" ]'
stop_relay "$RELAY_PID"
[ "$(js info WALQ)" = "$N" ] || fail "expected $N messages in the stream, found $(js info WALQ)"
# Every event streamed again (the slot put back to its copy): the same
# ids, so the server's dedup drops them all.
done_at=$(q "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'pgoutbox_ev'")
q "SELECT pg_drop_replication_slot('pgoutbox_ev')" >/dev/null
q "SELECT pg_copy_logical_replication_slot('pgoutbox_ev_again', 'pgoutbox_ev')" >/dev/null
q "SELECT pg_drop_replication_slot('pgoutbox_ev_again')" >/dev/null
start_relay "$T_TMP/r3" --queue ev --sink nats --nats-url "$NATS_URL" --nats-subject 'app.{queue}.{topic}' --batch 50
wait_until 60 '[ "$(q "SELECT confirmed_flush_lsn >= '"'$done_at'"' FROM pg_replication_slots WHERE slot_name = '"'pgoutbox_ev'"'")" = t ]'
stop_relay "$RELAY_PID"
grep -q "stopped ($N events acked)" "$T_TMP/r3.log" || fail "the slot's copy did not stream every event again: $(tail -2 "$T_TMP/r3.log")"
[ "$(js info WALQ)" = "$N" ] || fail "a redelivered event was stored again: $(js info WALQ) messages"

psql -XAtq "$DATABASE_URL" -c "SELECT json_agg(e ORDER BY id) FROM expected e" >"$T_TMP/expected.json"
node "$NODE_DIR/consume.js" "$NATS_URL" WALQ "$N" >"$T_TMP/node.jsonl" 2>"$T_TMP/node.log" ||
	{ cat "$T_TMP/node.log" >&2; fail "the nats npm consumer"; }
python3 - "$T_TMP/expected.json" "$T_TMP/node.jsonl" <<'PY' || fail "what the nats npm client read differs from the events (see above)"
import json, sys
want = {e['id']: e for e in json.load(open(sys.argv[1]))}
got, last = {}, {}
for line in open(sys.argv[2]):
    m = json.loads(line)
    h = m['headers']
    i = int(h['Nats-Msg-Id'])
    if i in got:
        sys.exit(f'event {i} twice in the stream')
    got[i] = m
    e = want.get(i)
    if e is None:
        sys.exit(f'message {m["seq"]}: unknown event {i} (rolled back?)')
    if m['subject'] != f'app.ev.{e["topic"]}':
        sys.exit(f'event {i}: subject {m["subject"]}')
    if json.loads(m['data']) != json.loads(e['payload']):
        sys.exit(f'event {i}: data {m["data"]!r} != {e["payload"]!r}')
    expect = {'Nats-Msg-Id': str(i), 'Pgoutbox-Type': e['type'],
              'Pgoutbox-Created-At': None}
    if e['key'] is not None:
        expect['Pgoutbox-Key'] = e['key']
    for k, v in json.loads(e['headers']).items():
        expect[k] = v if isinstance(v, str) else json.dumps(v)
    if set(h) != set(expect):
        sys.exit(f'event {i}: headers {sorted(h)} != {sorted(expect)}')
    for k, v in expect.items():
        if v is not None and h[k] != v:
            sys.exit(f'event {i}: header {k} {h[k]!r} != {v!r}')
    ca = h['Pgoutbox-Created-At'].rstrip('Z')
    if ca.rstrip('0').rstrip('.') != e['created_at'].rstrip('0').rstrip('.'):
        sys.exit(f'event {i}: created_at {ca} != {e["created_at"]}')
    if e['key'] is not None:
        if i < last.get(e['key'], 0):
            sys.exit(f'key {e["key"]}: event {i} after {last[e["key"]]}')
        last[e['key']] = i
if set(got) != set(want):
    sys.exit(f'{len(got)} events in the stream, {len(want)} expected')
print(f'  {len(got)} events, each once, headers and data exact, keys in order',
      file=sys.stderr)
PY
note "kill -9 at $killed_at of $N messages; all $N streamed again and dropped by dedup; the nats npm client read $N, each once"
