# The redis sink delivers every event to its stream with the exact fields
# (id, topic, key, type, payload, headers, created_at), through an ACL user
# with a password and a database number from the URL; the stream template
# routes by topic; config show never prints the password; MAXLEN ~ trims.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../redis.sh"
trap 'cleanup_pids; redis_stop' EXIT
redis_start "$T_TMP/redis" --requirepass defaultpw --user relay on '>s3cr3t' '~*' '&*' '+@all'
URL="redis://relay:s3cr3t@127.0.0.1:$REDIS_PORT/3"
r3() { rcli --user relay --pass s3cr3t -n 3 "$@"; }
t_db
N=2000
# Topics, NULL and non-NULL keys, quotes, newlines, Unicode, headers.
q "INSERT INTO pgoutbox.outbox (topic, key, type, payload, headers)
   SELECT CASE WHEN i % 3 = 0 THEN 'users' ELSE 'orders' END,
          CASE WHEN i % 5 = 0 THEN NULL ELSE 'k' || (i % 17) END,
          'thing.happened',
          jsonb_build_object('i', i, 'text', 'quote \" and
newline, ünïcödé ✓'),
          CASE WHEN i % 2 = 0 THEN '{}' ELSE jsonb_build_object('traceparent', 'tp-' || i) END
   FROM generate_series(1, $N) i"
# What the relay will publish, kept before the rows leave the queue.
q "CREATE TABLE expected AS SELECT id, topic, coalesce(key, '') AS key, type,
   payload::text AS payload, headers::text AS headers,
   replace(replace(to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'), ' ', 'T'), '.000000', '') AS created_at
   FROM pgoutbox.outbox"
start_relay "$T_TMP/relay" --sink redis --redis "$URL" --redis-stream 'app:{queue}:{topic}' --batch 200
wait_until 60 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
grep -q "connected to 127.0.0.1:$REDIS_PORT/3" "$T_TMP/relay.log" || fail "no 'connected' line in the relay log"
grep -q s3cr3t "$T_TMP/relay.log" && fail "the password appears in the log"

[ "$(r3 XLEN app:outbox:orders)" -gt 0 ] || fail "nothing in app:outbox:orders (database 3)"
[ "$(rcli -a defaultpw -n 0 EXISTS app:outbox:orders)" = 0 ] || fail "events went to database 0"
r3 --json XRANGE app:outbox:orders - + >"$T_TMP/orders.json"
r3 --json XRANGE app:outbox:users - + >"$T_TMP/users.json"
psql -XAtq "$DATABASE_URL" -c "SELECT json_agg(e ORDER BY id) FROM expected e" >"$T_TMP/expected.json"
python3 - "$T_TMP" "$N" <<'EOF' || fail "stream entries differ from the events (see above)"
import json, sys
tmp, n = sys.argv[1], int(sys.argv[2])
want = {str(e['id']): e for e in json.load(open(f'{tmp}/expected.json'))}
got = {}
for stream, topic in (('orders', 'orders'), ('users', 'users')):
    for entry_id, fields in json.load(open(f'{tmp}/{stream}.json')):
        f = dict(zip(fields[0::2], fields[1::2]))
        if list(f) != ['id', 'topic', 'key', 'type', 'payload', 'headers', 'created_at']:
            sys.exit(f'entry {entry_id}: fields {list(f)}')
        if f['topic'] != topic:
            sys.exit(f'entry {entry_id}: topic {f["topic"]} in stream {stream}')
        if f['id'] in got:
            sys.exit(f'event {f["id"]} twice')
        got[f['id']] = f
if set(got) != set(want):
    sys.exit(f'{len(got)} events in Redis, {len(want)} expected; missing {sorted(set(want) - set(got))[:5]}')
for i, f in got.items():
    e = want[i]
    for k in ('topic', 'key', 'type', 'payload', 'headers'):
        if f[k] != e[k]:
            sys.exit(f'event {i}: {k} {f[k]!r} != {e[k]!r}')
    # PostgreSQL prints microseconds without trailing zeros.
    if f['created_at'].rstrip('Z').rstrip('0').rstrip('.') != e['created_at'].rstrip('0').rstrip('.'):
        sys.exit(f'event {i}: created_at {f["created_at"]} != {e["created_at"]}')
print(f'  {len(got)} events, every field exact', file=sys.stderr)
EOF
# Per key, stream order is id order (ordered mode, the default).
python3 - "$T_TMP" <<'EOF' || fail "a key's events are out of order in the stream"
import json, sys
tmp = sys.argv[1]
for s in ('orders', 'users'):
    last = {}
    for entry_id, fields in json.load(open(f'{tmp}/{s}.json')):
        f = dict(zip(fields[0::2], fields[1::2]))
        if f['key'] and int(f['id']) < last.get(f['key'], 0):
            sys.exit(f'key {f["key"]}: event {f["id"]} after {last[f["key"]]}')
        last[f['key']] = int(f['id'])
EOF

# config show masks the URL (the password never shows).
"$PGO_BIN" config show --redis "$URL" >"$T_TMP/show" 2>&1 || true
grep -q '^redis_url = ' "$T_TMP/show" || fail "config show has no redis_url"
grep -q s3cr3t "$T_TMP/show" && fail "config show prints the Redis password"

# MAXLEN ~ N trims old entries (approximately: whole macro nodes).
q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 'trim', 'x', '{}' FROM generate_series(1, 3000)"
start_relay "$T_TMP/relay2" --sink redis --redis "$URL" --redis-maxlen 200
wait_until 60 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
len=$(r3 XLEN pgoutbox:trim)
[ "$len" -ge 200 ] && [ "$len" -lt 1000 ] || fail "XLEN after MAXLEN ~ 200 is $len"
note "MAXLEN ~ 200 kept $len of 3000 entries"
