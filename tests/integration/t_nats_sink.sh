# The nats sink against a real nats-server (JetStream, file storage): every
# event lands in the stream once, on the subject of its topic, with the
# payload as data and the exact headers (Nats-Msg-Id = id, Pgoutbox-Type,
# -Key, -Created-At, the event's own headers); per key, stream order is id
# order; a redelivery of an id is dropped by the server's dedup; the URL's
# password is never printed; CloudEvents mode adds the ce- headers; and
# the nats npm client, which no one here wrote, reads the same messages.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../nats.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
trap 'cleanup_pids; nats_stop' EXIT
export NATS_USER=relay NATS_PASS=s3cr3t
nats_start "$T_TMP/nats" --user relay --pass s3cr3t
URL="nats://relay:s3cr3t@127.0.0.1:$NATS_PORT"
js create OUTBOX 'app.>'
t_db
N=2000
q "INSERT INTO pgoutbox.outbox (topic, key, type, payload, headers)
   SELECT CASE WHEN i % 3 = 0 THEN 'users' ELSE 'orders' END,
          CASE WHEN i % 5 = 0 THEN NULL ELSE 'k' || (i % 17) END,
          'thing.happened',
          jsonb_build_object('i', i, 'text', 'quote \" and
newline, ünïcödé ✓'),
          CASE WHEN i % 2 = 0 THEN '{}' ELSE jsonb_build_object('traceparent', 'tp-' || i, 'n', i) END
   FROM generate_series(1, $N) i"
q "CREATE TABLE expected AS SELECT id, topic, key, type,
   payload::text AS payload, headers::text AS headers,
   replace(replace(to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'), ' ', 'T'), '.000000', '') AS created_at
   FROM pgoutbox.outbox"
start_relay "$T_TMP/relay" --sink nats --nats-url "$URL" --nats-subject 'app.{queue}.{topic}' --batch 200
wait_until 60 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
grep -q "connected to 127.0.0.1:$NATS_PORT" "$T_TMP/relay.log" || fail "no 'connected' line in the relay log"
grep -q s3cr3t "$T_TMP/relay.log" && fail "the password appears in the log"
[ "$(js info OUTBOX)" = "$N" ] || fail "expected $N messages in the stream, found $(js info OUTBOX)"

js dump OUTBOX >"$T_TMP/stream.jsonl"
psql -XAtq "$DATABASE_URL" -c "SELECT json_agg(e ORDER BY id) FROM expected e" >"$T_TMP/expected.json"
check_stream() {
	python3 - "$T_TMP/expected.json" "$1" <<'PY'
import json, sys
want = {e['id']: e for e in json.load(open(sys.argv[1]))}
got = {}
last = {}
for line in open(sys.argv[2]):
    m = json.loads(line)
    h = m['headers']
    i = int(h['Nats-Msg-Id'])
    if i in got:
        sys.exit(f'event {i} twice in the stream')
    got[i] = m
    e = want.get(i)
    if e is None:
        sys.exit(f'message {m["seq"]}: unknown event {i}')
    if m['subject'] != f'app.outbox.{e["topic"]}':
        sys.exit(f'event {i}: subject {m["subject"]}')
    if m['data'] != e['payload']:
        sys.exit(f'event {i}: data {m["data"]!r} != {e["payload"]!r}')
    own = json.loads(e['headers'])
    expect = {'Nats-Msg-Id': str(i), 'Pgoutbox-Type': e['type'],
              'Pgoutbox-Created-At': None}
    if e['key'] is not None:
        expect['Pgoutbox-Key'] = e['key']
    for k, v in own.items():
        expect[k] = v if isinstance(v, str) else json.dumps(v)
    if set(h) != set(expect):
        sys.exit(f'event {i}: headers {sorted(h)} != {sorted(expect)}')
    for k, v in expect.items():
        if v is not None and h[k] != v:
            sys.exit(f'event {i}: header {k} {h[k]!r} != {v!r}')
    ca = h['Pgoutbox-Created-At']
    if ca.rstrip('Z').rstrip('0').rstrip('.') != e['created_at'].rstrip('0').rstrip('.'):
        sys.exit(f'event {i}: created_at {ca} != {e["created_at"]}')
    if e['key'] is not None:
        if i < last.get(e['key'], 0):
            sys.exit(f'key {e["key"]}: event {i} after {last[e["key"]]}')
        last[e['key']] = i
if set(got) != set(want):
    sys.exit(f'{len(got)} events in the stream, {len(want)} expected')
print(f'  {len(got)} events, each once, headers and data exact, keys in order', file=sys.stderr)
PY
}
check_stream "$T_TMP/stream.jsonl" || fail "the stream differs from the events (see above)"

# The nats npm client reads the same messages.
command -v node >/dev/null || fail "node not found (needed for the nats npm client)"
NODE_DIR=$ROOT/tests/nats
if [ ! -f "$NODE_DIR/node_modules/nats/package.json" ]; then
	(cd "$NODE_DIR" && npm ci --no-audit --no-fund --silent) >"$T_TMP/npm.log" 2>&1 ||
		{ cat "$T_TMP/npm.log" >&2; fail "npm ci in tests/nats"; }
fi
node "$NODE_DIR/consume.js" "$NATS_URL" OUTBOX "$N" >"$T_TMP/node.jsonl" 2>"$T_TMP/node.log" ||
	{ cat "$T_TMP/node.log" >&2; fail "the nats npm consumer"; }
check_stream "$T_TMP/node.jsonl" || fail "what the nats npm client read differs from the events"

# A redelivery within the duplicate window: the server drops it.
dup=$(q "SELECT min(id) FROM expected")
q "INSERT INTO pgoutbox.outbox (id, topic, key, type, payload, headers)
   SELECT id, topic, key, type, payload::jsonb, headers::jsonb FROM expected WHERE id = $dup"
start_relay "$T_TMP/relay_dup" --sink nats --nats-url "$URL" --nats-subject 'app.{queue}.{topic}'
wait_until 30 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
[ "$(js info OUTBOX)" = "$N" ] || fail "a redelivered id was stored again: $(js info OUTBOX) messages"
note "redelivery of event $dup: acked, dropped by the stream's dedup"

# config show masks the password.
"$PGO_BIN" config show --sink nats --nats-url "$URL" >"$T_TMP/show" 2>&1 || true
grep -q '^nats_url = nats://relay:\*\*\*@127.0.0.1' "$T_TMP/show" || { cat "$T_TMP/show" >&2; fail "config show: no masked nats_url"; }
grep -q s3cr3t "$T_TMP/show" && fail "config show prints the NATS password"

# CloudEvents: the ce- headers of the NATS binding.
js create CE 'ce.>'
q "SELECT pgoutbox.send('ce.orders', 'k1', 'order.created', '{\"n\": 1}', '{\"traceparent\": \"00-t-01\"}')" >/dev/null
ceid=$(q "SELECT max(id) FROM pgoutbox.outbox")
start_relay "$T_TMP/relay_ce" --sink nats --nats-url "$URL" --nats-format cloudevents
wait_until 30 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
js dump CE >"$T_TMP/ce.jsonl"
python3 - "$T_TMP/ce.jsonl" "$ceid" <<'PY' || fail "CloudEvents headers"
import json, sys
msgs = [json.loads(l) for l in open(sys.argv[1])]
assert len(msgs) == 1, msgs
h = msgs[0]['headers']
want = {'ce-specversion': '1.0', 'ce-id': sys.argv[2], 'ce-source': '/ce.orders',
        'ce-type': 'order.created', 'ce-subject': 'k1',
        'content-type': 'application/json', 'traceparent': '00-t-01',
        'Nats-Msg-Id': sys.argv[2]}
for k, v in want.items():
    if h.get(k) != v:
        sys.exit(f'{k}: {h.get(k)!r} != {v!r}')
if h['ce-time'] != h['Pgoutbox-Created-At']:
    sys.exit('ce-time')
assert msgs[0]['data'] == '{"n": 1}', msgs[0]['data']
PY
note "CloudEvents: ce-id, ce-source, ce-type, ce-subject, ce-time, content-type"
