# The web console on a relay's metrics address ([console] enabled = true,
# docs/console.md): the overview in headless Chromium shows the counts of
# `status --json`; the console's queries run on a thread and connection
# of their own, so while one of them waits for a lock, /metrics and
# /healthz answer at once and the relay keeps delivering; with too many
# waiting, more are refused (503) instead of queued without end.  On its
# loopback address the endpoint refuses a Host of another name.
# serial: timing-sensitive, run alone (tests/run.sh)
. "$(dirname "$0")/../lib.sh"
command -v /usr/bin/chromium >/dev/null || fail "chromium not installed (scripts/deps.sh installs it)"
NODE_DIR=$(cd "$(dirname "$0")/../console" && pwd)
if [ ! -f "$NODE_DIR/node_modules/playwright-core/package.json" ] ||
	[ "$NODE_DIR/package-lock.json" -nt "$NODE_DIR/node_modules/.package-lock.json" ]; then
	(cd "$NODE_DIR" && flock "$NODE_DIR/package-lock.json" \
		npm ci --no-audit --no-fund --loglevel=error) >&2 || fail "npm ci in tests/console"
fi
t_db
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
MPORT=$(free_port)
M=http://127.0.0.1:$MPORT

q "INSERT INTO pgoutbox.outbox (topic, key, type, payload, run_at)
   SELECT 'orders', 'later-' || i, 'order.created', jsonb_build_object('i', i), now() + interval '1 hour'
   FROM generate_series(1, 5) i"
"$PGO_BIN" queue create jobs >/dev/null
"$PGO_BIN" queue enqueue jobs '{"job": 1}' >/dev/null
q "INSERT INTO pgoutbox.dead_letters (id, queue, topic, key, type, payload, headers, created_at, attempts, last_error)
   VALUES (42, 'outbox', 'orders', 'k42', 'x', '{}', '{}', now(), 5, 'sink said 500')"

PGOUTBOX_CONSOLE_ENABLED=true start_relay "$T_TMP/relay.out" --sink stdout --mode concurrent \
	--poll-interval 200ms --metrics-listen "127.0.0.1:$MPORT"
wait_until 30 '[ "$(curl -s -o /dev/null -w "%{http_code}" $M/readyz)" = 200 ]'
grep -q 'console on the metrics address, read-only' "$T_TMP/relay.out.log" ||
	fail "no console line in the relay's log: $(cat "$T_TMP/relay.out.log")"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$M/")" = 200 ] || fail "/ is not served"
grep -q '^pgoutbox_' <<<"$(curl -s "$M/metrics")" || fail "/metrics lost its samples"
body=$(curl -s -X POST -H 'Content-Type: application/x-www-form-urlencoded' \
	--data 'queue=outbox&ids=42' "$M/api/dead/retry")
grep -q 'read-only' <<<"$body" || fail "a retry without a session: $body"

# On a loopback address the endpoint answers only to a loopback Host (DNS
# rebinding): /metrics, /healthz and the console alike.
for path in /metrics /healthz / /api/overview; do
	code=$(curl -s -o "$T_TMP/host.txt" -w '%{http_code}' -H 'Host: evil.example' "$M$path")
	[ "$code" = 403 ] && grep -q 'answers only to localhost' "$T_TMP/host.txt" ||
		fail "Host evil.example, $path: $code $(cat "$T_TMP/host.txt")"
	code=$(curl -s -o /dev/null -w '%{http_code}' -H "Host: localhost:$MPORT" "$M$path")
	[ "$code" = 200 ] || fail "Host localhost:$MPORT, $path: $code"
done
note "a Host of another name is refused (403), localhost answered"

# The overview in the browser.
CONSOLE_URL=$M ONLY=overview PGO_BIN=$PGO_BIN DATABASE_URL=$DATABASE_URL \
	node "$NODE_DIR/console_test.js" >&2 || fail "console_test.js (overview)"

# A console query waits for a lock for up to 4 s: the loop does not.
psql -XAtq "$DATABASE_URL" -c "BEGIN; LOCK pgoutbox.dead_letters IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(4); COMMIT" >/dev/null &
LOCK_PID=$!
sleep 0.5
curl -s -o "$T_TMP/slow.json" -w '%{time_total}\n' "$M/api/overview" >"$T_TMP/slow.time" &
CURL_PID=$!
sleep 0.3
"$PGO_BIN" send --topic now '{"during": "the lock"}' >/dev/null
t0=$(date +%s%N)
for _ in 1 2 3 4 5; do
	[ "$(curl -s -o /dev/null -w '%{http_code}' "$M/healthz")" = 200 ] || fail "/healthz while the console waits"
	grep -q '^pgoutbox_' <<<"$(curl -s "$M/metrics")" || fail "/metrics while the console waits"
done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
note "10 requests to /healthz and /metrics while the console waited: ${ms} ms"
[ "$ms" -lt 2000 ] || fail "the endpoint was slow while the console waited: ${ms} ms"
wait_until 10 'grep -q "the lock" "$T_TMP/relay.out"'
note "the relay delivered an event while the console waited"
wait "$CURL_PID"
wait "$LOCK_PID"
# It answered, bounded by the console's lock_timeout (2 s), or after the
# lock went.
grep -q '"queues"\|lock timeout' "$T_TMP/slow.json" || fail "the waiting overview: $(cat "$T_TMP/slow.json")"
note "the waiting overview answered after $(cat "$T_TMP/slow.time") s: $(head -c 80 "$T_TMP/slow.json")"

stop_relay "$RELAY_PID"
grep -q 'AddressSanitizer\|runtime error' "$T_TMP/relay.out.log" && fail "sanitizer: $(cat "$T_TMP/relay.out.log")"
echo ok
