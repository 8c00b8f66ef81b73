# The bullmq sink's contract with real BullMQ Workers, for bullmq 6.7.x and
# 5.81.x (npm aliases bullmq6 and bullmq5 in tests/bullmq/package.json):
# the add script is exported from each installed package with
# tools/bullmq-export.js, the relay adds the jobs with it, and a real Worker
# of that version processes every event exactly once with job id
# ob-<event id>, name = type and data = payload; a job that throws once is
# retried by BullMQ (attempts); an event sent again with the same id adds
# no second job while the first job's hash exists.  Each version's job is
# also compared with the one its own Queue.add leaves in Redis, the relay
# survives a Redis restart and a SCRIPT FLUSH (NOSCRIPT), and with
# removeOnComplete a re-sent event becomes a second job that an inbox
# Worker (inbox_claim) applies once.  An untested major or a missing
# script file stops the relay at start with a clear message.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../redis.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NODE_DIR=$ROOT/tests/bullmq
WORKER_PIDS=()
stop_workers() {
	for p in "${WORKER_PIDS[@]:-}"; do
		[ -n "$p" ] && kill -9 "$p" 2>/dev/null || true
	done
}
trap 'stop_workers; cleanup_pids; redis_stop' EXIT

command -v node >/dev/null || fail "node not found (needed for the BullMQ Workers)"
command -v npm >/dev/null || fail "npm not found (needed to install bullmq)"
# Install the pinned bullmq versions on first use (package-lock.json).
if [ ! -f "$NODE_DIR/node_modules/bullmq6/package.json" ] ||
	[ ! -f "$NODE_DIR/node_modules/bullmq5/package.json" ] ||
	[ ! -f "$NODE_DIR/node_modules/pg/package.json" ] ||
	[ "$NODE_DIR/package-lock.json" -nt "$NODE_DIR/node_modules/.package-lock.json" ]; then
	note "installing bullmq with npm ci in tests/bullmq"
	(cd "$NODE_DIR" && flock "$NODE_DIR/package-lock.json" \
		npm ci --no-audit --no-fund --loglevel=error) >"$T_TMP/npm.log" 2>&1 ||
		{ cat "$T_TMP/npm.log" >&2; fail "npm ci in tests/bullmq failed"; }
fi

redis_start "$T_TMP/redis"
t_db
N=60
export PGOUTBOX_SINK_REDIS_URL=$REDIS_URL PGOUTBOX_SINK_BULLMQ_ATTEMPTS=3

# Refused at start: no script, an untested major, another script.
PGOUTBOX_SINK_BULLMQ_SCRIPT= "$PGO_BIN" relay --sink bullmq >/dev/null 2>"$T_TMP/noscript.log" &&
	fail "the relay started without sink.bullmq_script"
grep -q "sink.bullmq_script is not set" "$T_TMP/noscript.log" ||
	{ cat "$T_TMP/noscript.log" >&2; fail "no clear message for a missing script"; }
node "$ROOT/tools/bullmq-export.js" --from "$NODE_DIR" --package bullmq6 --out "$T_TMP/add7.lua" 2>/dev/null ||
	fail "bullmq-export.js failed"
sed -i '1s/bullmq=6\.[0-9.]*/bullmq=7.0.0/' "$T_TMP/add7.lua"
PGOUTBOX_SINK_BULLMQ_SCRIPT=$T_TMP/add7.lua "$PGO_BIN" relay --sink bullmq >/dev/null 2>"$T_TMP/major.log" &&
	fail "the relay started with bullmq 7.0.0's script"
grep -q "bullmq 7.0.0 is an untested major version" "$T_TMP/major.log" ||
	{ cat "$T_TMP/major.log" >&2; fail "no clear message for an untested major"; }

# One run per version: each into queues of its own.
for v in 6 5; do
	note "bullmq$v"
	out=$T_TMP/jobs$v.ndjson
	node "$ROOT/tools/bullmq-export.js" --from "$NODE_DIR" --package "bullmq$v" \
		--out "$T_TMP/add$v.lua" 2>"$T_TMP/export$v.log" ||
		{ cat "$T_TMP/export$v.log" >&2; fail "bullmq-export.js --package bullmq$v failed"; }
	export PGOUTBOX_SINK_BULLMQ_SCRIPT=$T_TMP/add$v.lua
	export PGOUTBOX_SINK_BULLMQ_QUEUE="v$v-{topic}"
	if [ "$v" = 5 ]; then
		export PGOUTBOX_SINK_BULLMQ_REMOVE_ON_COMPLETE=1000
	else
		unset PGOUTBOX_SINK_BULLMQ_REMOVE_ON_COMPLETE
	fi
	# The same job from the relay and from BullMQ's own Queue.add: the same
	# job hash (but its timestamp), wait list, events, meta, marker, id.
	q "INSERT INTO pgoutbox.outbox (id, topic, key, type, payload)
	   VALUES (4242, 'cmp', 'k', 'order.created', '{\"a\": [1, \"x\"], \"b\": null}')"
	start_relay "$T_TMP/relaycmp$v" --sink bullmq
	wait_until 30 '[ "$(pending)" = 0 ]'
	stop_relay "$RELAY_PID"
	roc=${PGOUTBOX_SINK_BULLMQ_REMOVE_ON_COMPLETE:+, \"removeOnComplete\": $PGOUTBOX_SINK_BULLMQ_REMOVE_ON_COMPLETE}
	(cd "$NODE_DIR" && node add.js "bullmq$v" "$REDIS_URL" "v$v-ref" order.created \
		'{"a": [1, "x"], "b": null}' "{\"jobId\": \"ob-4242\", \"attempts\": 3$roc}") \
		>"$T_TMP/add$v.out" 2>&1 || { cat "$T_TMP/add$v.out" >&2; fail "Queue.add of bullmq$v failed"; }
	[ "$(rcli HGET "bull:v$v-cmp:ob-4242" name)" = order.created ] || fail "bullmq$v: no job ob-4242 from the relay"
	for k in job wait meta events marker id; do
		case $k in
		job) a=$(rcli --json HGETALL "bull:v$v-cmp:ob-4242"); b=$(rcli --json HGETALL "bull:v$v-ref:ob-4242") ;;
		wait) a=$(rcli --json LRANGE "bull:v$v-cmp:wait" 0 -1); b=$(rcli --json LRANGE "bull:v$v-ref:wait" 0 -1) ;;
		meta) a=$(rcli --json HGETALL "bull:v$v-cmp:meta"); b=$(rcli --json HGETALL "bull:v$v-ref:meta") ;;
		events) a=$(rcli --json XRANGE "bull:v$v-cmp:events" - +); b=$(rcli --json XRANGE "bull:v$v-ref:events" - +) ;;
		marker) a=$(rcli --json ZRANGE "bull:v$v-cmp:marker" 0 -1 WITHSCORES); b=$(rcli --json ZRANGE "bull:v$v-ref:marker" 0 -1 WITHSCORES) ;;
		id) a=$(rcli GET "bull:v$v-cmp:id"); b=$(rcli GET "bull:v$v-ref:id") ;;
		esac
		python3 - "$k" "$a" "$b" <<'EOF' || fail "bullmq$v: the relay's job differs from Queue.add's ($k)"
import json, sys
k, a, b = sys.argv[1], sys.argv[2], sys.argv[3]
def norm(s):
    try:
        x = json.loads(s)
    except ValueError:
        return s
    if k == 'job':
        x = dict(zip(x[0::2], x[1::2])) if isinstance(x, list) else x
        x.pop('timestamp', None)
        x['data'] = json.loads(x['data'])
        x['opts'] = json.loads(x['opts'])
    if k == 'events':
        x = [dict(zip(f[0::2], f[1::2])) for _, f in x]
    if k == 'meta':
        # A Queue object writes its library version there when it
        # connects; the add script does not.
        x = dict(zip(x[0::2], x[1::2])) if isinstance(x, list) else x
        x.pop('version', None)
    return x
if norm(a) != norm(b):
    sys.exit(f"{k}: relay {a} != Queue.add {b}")
EOF
	done
	note "job ob-4242: the same as Queue.add's"

	q "DELETE FROM pgoutbox.outbox; DROP TABLE IF EXISTS expected"
	q "INSERT INTO pgoutbox.outbox (topic, key, type, payload)
	   SELECT CASE WHEN i % 3 = 0 THEN 'users' ELSE 'orders' END,
	          'k' || (i % 7),
	          CASE WHEN i % 2 = 0 THEN 'order.created' ELSE 'user.renamed' END,
	          CASE WHEN i = 7 THEN jsonb_build_object('i', i, 'fail_once', true)
	               ELSE jsonb_build_object('i', i, 'text', 'quote \" ünïcödé ✓', 'n', null, 'a', jsonb_build_array(1, 2.5, 'x')) END
	   FROM generate_series(1, $N) i"
	q "CREATE TABLE expected AS SELECT id, topic, key, type, payload FROM pgoutbox.outbox"

	: >"$out"
	rm -f "$out.ready"
	(cd "$NODE_DIR" && exec node worker.js "bullmq$v" "$REDIS_URL" "$out" "v$v-orders" "v$v-users") \
		2>"$T_TMP/worker$v.log" &
	WORKER_PIDS+=($!)
	wpid=$!
	wait_until 30 "[ -f '$out.ready' ]"
	[ "$(cat "$out.ready")" = "$(sed -n '1s/.*bullmq=\([^ ]*\).*/\1/p' "$T_TMP/add$v.lua")" ] ||
		fail "the Worker runs bullmq $(cat "$out.ready"), the script is from another version"

	start_relay "$T_TMP/relay$v" --sink bullmq --batch 25 --poll-interval 2s
	wait_until 60 '[ "$(pending)" = 0 ]'
	wait_until 60 "[ \$(grep -c '\"outcome\":\"done\"' '$out') -ge $N ]"
	grep -q "bullmq $(cat "$out.ready")" "$T_TMP/relay$v.log" || fail "the relay log does not name the bullmq version"

	# Redis restarted while events are written: they wait in the outbox,
	# and the new connection loads the script before adding them.
	redis_stop
	q "INSERT INTO pgoutbox.outbox (topic, key, type, payload)
	   SELECT 'orders', 'k' || (i % 7), 'order.paid', jsonb_build_object('i', i, 'outage', true)
	   FROM generate_series($N + 1, $N + 10) i;
	   INSERT INTO expected SELECT id, topic, key, type, payload FROM pgoutbox.outbox"
	sleep 1
	[ "$(pending)" = 10 ] || fail "events left the outbox while Redis was down"
	redis_start_again
	wait_until 60 '[ "$(pending)" = 0 ]'
	wait_until 60 "[ \$(grep -c '\"outcome\":\"done\"' '$out') -ge $((N + 10)) ]"

	# The same event again (a relay that crashed before its COMMIT), after
	# the script cache was flushed: NOSCRIPT, loaded again, then sent.
	rcli SCRIPT FLUSH >/dev/null
	dup=$(q "SELECT min(id) FROM expected WHERE payload ? 'text'")
	q "INSERT INTO pgoutbox.outbox (id, topic, key, type, payload)
	   SELECT id, topic, key, type, payload FROM expected WHERE id = $dup"
	wait_until 30 '[ "$(pending)" = 0 ]'
	stop_relay "$RELAY_PID"
	grep -q NOSCRIPT "$T_TMP/relay$v.log" || fail "the relay never met NOSCRIPT after SCRIPT FLUSH"
	grep -q "duplicated" <(rcli XRANGE "bull:v$v-$(q "SELECT topic FROM expected WHERE id = $dup"):events" - +) ||
		fail "BullMQ did not report the re-sent job ob-$dup as duplicated"
	sleep 1 # time for a second job, if one had been added, to be processed
	kill -TERM "$wpid"
	wait "$wpid" || fail "the bullmq$v Worker exited non-zero"

	psql -XAtq "$DATABASE_URL" -c "SELECT json_agg(e ORDER BY id) FROM expected e" >"$T_TMP/expected$v.json"
	python3 - "$T_TMP/expected$v.json" "$out" "$v" <<'EOF' || fail "bullmq$v: the Worker's jobs differ from the events (see above)"
import json, sys
want = {f"ob-{e['id']}": e for e in json.load(open(sys.argv[1]))}
v = sys.argv[3]
done, thrown = {}, {}
for line in open(sys.argv[2]):
    r = json.loads(line)
    (done if r['outcome'] == 'done' else thrown).setdefault(r['id'], []).append(r)
for jid, runs in done.items():
    if len(runs) != 1:
        sys.exit(f"job {jid} processed {len(runs)} times")
if set(done) != set(want):
    sys.exit(f"{len(done)} jobs done, {len(want)} events; missing {sorted(set(want) - set(done))[:5]}, "
             f"unexpected {sorted(set(done) - set(want))[:5]}")
for jid, e in want.items():
    r = done[jid][0]
    if r['queue'] != f"v{v}-{e['topic']}":
        sys.exit(f"{jid}: queue {r['queue']} for topic {e['topic']}")
    if r['name'] != e['type']:
        sys.exit(f"{jid}: name {r['name']!r} != type {e['type']!r}")
    if r['data'] != e['payload']:
        sys.exit(f"{jid}: data {r['data']!r} != payload {e['payload']!r}")
    if r['opts'].get('attempts') != 3:
        sys.exit(f"{jid}: opts {r['opts']}: attempts is not 3")
    if v == '5' and r['opts'].get('removeOnComplete') != 1000:
        sys.exit(f"{jid}: opts {r['opts']}: removeOnComplete is not 1000")
    fail_once = e['payload'].get('fail_once', False)
    if fail_once and (len(thrown.get(jid, [])) != 1 or r['attemptsMade'] != 1):
        sys.exit(f"{jid}: thrown {len(thrown.get(jid, []))} times, done after {r['attemptsMade']} failures; want 1 and 1")
    if not fail_once and jid in thrown:
        sys.exit(f"{jid}: thrown without fail_once")
print(f"  {len(done)} jobs, each processed once, names and data exact; 1 retried", file=sys.stderr)
EOF
done

# removeOnComplete: the job hash goes with the job, so a re-sent event is
# a second job; a Worker that claims the event id in the inbox (as
# docs/bullmq.md shows) applies it once all the same.
note "bullmq6, removeOnComplete = true, inbox"
export PGOUTBOX_SINK_BULLMQ_SCRIPT=$T_TMP/add6.lua PGOUTBOX_SINK_BULLMQ_QUEUE="inbox-{topic}"
export PGOUTBOX_SINK_BULLMQ_REMOVE_ON_COMPLETE=true
q "SELECT * FROM pgoutbox.inbox_maintain()" >/dev/null
q "CREATE TABLE applied (event_id bigint, name text, data jsonb)"
q "DELETE FROM pgoutbox.outbox; DROP TABLE IF EXISTS expected"
q "INSERT INTO pgoutbox.outbox (topic, key, type, payload)
   SELECT 'orders', 'k' || (i % 5), 'order.created', jsonb_build_object('i', i)
   FROM generate_series(1, 20) i"
q "CREATE TABLE expected AS SELECT id, topic, key, type, payload FROM pgoutbox.outbox"
out=$T_TMP/inbox.ndjson
: >"$out"
(cd "$NODE_DIR" && PGHOST=$PG_DIR PGPORT=$PG_PORT PGUSER=postgres PGDATABASE=t_bullmq \
	exec node inbox-worker.js bullmq6 "$REDIS_URL" "$out" billing inbox-orders) 2>"$T_TMP/inbox-worker.log" &
WORKER_PIDS+=($!)
wpid=$!
wait_until 30 "[ -f '$out.ready' ]"
start_relay "$T_TMP/relayinbox" --sink bullmq --poll-interval 2s
wait_until 60 '[ "$(pending)" = 0 ]'
wait_until 60 "[ \$(grep -c '\"fresh\":true' '$out') -ge 20 ]"
wait_until 30 "[ \"\$(rcli EXISTS bull:inbox-orders:ob-\$(q 'SELECT min(id) FROM expected'))\" = 0 ]"
dup=$(q "SELECT min(id) FROM expected")
q "INSERT INTO pgoutbox.outbox (id, topic, key, type, payload)
   SELECT id, topic, key, type, payload FROM expected WHERE id = $dup"
wait_until 30 '[ "$(pending)" = 0 ]'
wait_until 30 "grep -q '\"id\":\"ob-$dup\",\"name\":\"order.created\",\"fresh\":false' '$out'"
stop_relay "$RELAY_PID"
kill -TERM "$wpid"
wait "$wpid" || { cat "$T_TMP/inbox-worker.log" >&2; fail "the inbox Worker exited non-zero"; }
[ "$(q "SELECT count(*) FROM applied")" = 20 ] || fail "applied holds $(q "SELECT count(*) FROM applied") rows, not 20"
[ "$(q "SELECT count(*) FROM expected e JOIN applied a ON a.event_id = e.id AND a.name = e.type AND a.data = e.payload")" = 20 ] ||
	fail "applied differs from the events"
[ "$(grep -c '"fresh":false' "$out")" = 1 ] || fail "want exactly one duplicate skipped by the inbox"
note "the re-sent event became a second job (its hash was removed); the inbox applied it once"
exit 0
