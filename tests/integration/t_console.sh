# The web console (`pgoutbox console`, docs/console.md) in Debian's
# headless Chromium, driven by playwright-core (tests/console/): the
# overview's counts equal `status --json` with a relay (stdout sink)
# running; a queue's items are searchable and show their envelope; a
# dead letter retried from the page is delivered by the relay, another
# discarded, both logged with who did it; an XSS payload shows as text;
# read-only mode and the CSRF check refuse actions; cron schedules pause
# and resume; a banner appears when PostgreSQL stops and goes when it is
# back.  The overview's charts draw real levels: the lag of a work queue
# nobody drains and the slot lag of a WAL queue equal what `status
# --json` says, and a transaction holding xmin is drawn and counted.  CONSOLE_SHOTS=DIR writes a PNG of each page there (the
# screenshots of docs/console.md: CONSOLE_SHOTS=$PWD/docs/console).
. "$(dirname "$0")/../lib.sh"
command -v /usr/bin/chromium >/dev/null || fail "chromium not installed (scripts/deps.sh installs it)"
command -v node >/dev/null || fail "node not installed"
NODE_DIR=$(cd "$(dirname "$0")/../console" && pwd)
if [ ! -f "$NODE_DIR/node_modules/playwright-core/package.json" ] ||
	[ "$NODE_DIR/package-lock.json" -nt "$NODE_DIR/node_modules/.package-lock.json" ]; then
	(cd "$NODE_DIR" && flock "$NODE_DIR/package-lock.json" \
		npm ci --no-audit --no-fund --loglevel=error) >&2 || fail "npm ci in tests/console"
fi
# The pages never put text in as markup: no innerHTML and its kin.
if grep -nE 'innerHTML|outerHTML|insertAdjacentHTML|document\.write' \
	"$(dirname "$0")/../../src/lib/console/assets/app.js"; then
	fail "app.js writes markup; use textContent"
fi
# A cluster of its own: the test stops it.
PG_PORT= pg_start "$T_TMP/pg" fsync=off wal_level=logical max_replication_slots=4 max_wal_senders=4
trap 'cleanup_pids; pg_stop' EXIT
t_db
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The token is never taken from the command line, and never shown.
rc=0
"$PGO_BIN" console --token hunter2 >/dev/null 2>"$T_TMP/tok.log" || rc=$?
[ "$rc" = 2 ] || fail "console --token: exit $rc, expected 2"
grep -q 'never taken from the command line' "$T_TMP/tok.log" || fail "--token: $(cat "$T_TMP/tok.log")"
grep -q hunter2 "$T_TMP/tok.log" && fail "--token: the token was echoed"
PGOUTBOX_CONSOLE_TOKEN=hunter2 "$PGO_BIN" config show >"$T_TMP/show.txt" 2>&1
grep -q 'console.token' "$T_TMP/show.txt" || fail "config show lists no console.token"
grep -q hunter2 "$T_TMP/show.txt" && fail "config show shows the token"
# A bad address is refused at start.
rc=0
"$PGO_BIN" console --listen nonsense >/dev/null 2>"$T_TMP/bad.log" || rc=$?
[ "$rc" = 2 ] || fail "console --listen nonsense: exit $rc, expected 2"
grep -q 'expected host:port' "$T_TMP/bad.log" || fail "bad listen: $(cat "$T_TMP/bad.log")"

# Queues: the outbox with 7 events due in an hour (they stay pending
# while the relay runs), a work queue with 3 jobs and no worker; dead
# letters: one to retry, one to discard, one carrying HTML.
q "INSERT INTO pgoutbox.outbox (topic, key, type, payload, run_at)
   SELECT 'orders', 'later-' || i, 'order.created', jsonb_build_object('i', i), now() + interval '1 hour'
   FROM generate_series(1, 7) i"
"$PGO_BIN" queue create jobs >/dev/null
for i in 1 2 3; do "$PGO_BIN" queue enqueue jobs "{\"job\": $i}" >/dev/null; done
# A WAL queue no relay streams: its slot keeps WAL, more and more.
"$PGO_BIN" queue create events --kind outbox --capture wal >/dev/null || fail "queue create events --capture wal"
for i in 1 2 3; do "$PGO_BIN" send --queue events --topic t "{\"n\": $i}" >/dev/null; done
q "INSERT INTO pgoutbox.dead_letters (id, queue, topic, key, type, payload, headers, created_at, attempts, last_error) VALUES
   (42, 'outbox', 'orders', 'k42', 'order.created', '{\"note\": \"retry-me\"}', '{}', now(), 5, 'sink said 500'),
   (43, 'outbox', 'orders', 'k43', 'order.created', '{\"note\": \"discard-me\"}', '{}', now(), 5, 'sink said 400'),
   (666, 'outbox', 'orders', '<b>bold</b>', 'x', '{\"html\": \"<img src=x onerror=window.__xss=1;console.log(\\\"xss\\\")>\"}', '{}', now(), 5,
    'boom <script>console.log(\"xss\")</script>')"
# Cron: a nightly schedule, and ticks recorded by a scheduler that ran an
# every-second schedule for a few seconds.
"$PGO_BIN" cron add nightly '0 3 * * *' --queue jobs >/dev/null
"$PGO_BIN" cron add often '* * * * * *' --queue jobs >/dev/null
"$PGO_BIN" cron run >"$T_TMP/cron.log" 2>&1 &
CRON_PID=$!
PIDS+=("$CRON_PID")
wait_until 30 '[ "$(q "SELECT count(*) FROM pgoutbox.cron_history")" -ge 2 ]'
kill -TERM "$CRON_PID"; wait "$CRON_PID" || true
"$PGO_BIN" cron remove often >/dev/null

start_relay "$T_TMP/relay.out" --sink stdout --mode ordered --poll-interval 200ms
wait_until 30 '[ "$(q "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE '"'"'pgoutbox relay%'"'"'")" -ge 1 ]'

echo hunter2-$RANDOM$RANDOM >"$T_TMP/token"
CPORT=$(free_port)
PGOUTBOX_CONSOLE_TOKEN_FILE=$T_TMP/token "$PGO_BIN" console --listen "127.0.0.1:$CPORT" \
	>"$T_TMP/console.log" 2>&1 &
CONSOLE_PID=$!
PIDS+=("$CONSOLE_PID")
wait_until 30 'curl -sf "http://127.0.0.1:$CPORT/" >/dev/null'

if [ -n "${CONSOLE_SHOTS:-}" ]; then mkdir -p "$CONSOLE_SHOTS"; fi
CONSOLE_URL=http://127.0.0.1:$CPORT CONSOLE_TOKEN=$(cat "$T_TMP/token") \
	LAG_QUEUE=jobs WAL_QUEUE=events \
	RELAY_OUT=$T_TMP/relay.out CONSOLE_LOG=$T_TMP/console.log SHOTS=${CONSOLE_SHOTS:-} \
	PG_STOP=". '$PWD/scripts/pg.sh'; pg_stop" PG_START=". '$PWD/scripts/pg.sh'; pg_start_again" \
	PGO_BIN=$PGO_BIN DATABASE_URL=$DATABASE_URL \
	PG_DIR=$PG_DIR PG_BIN=$PG_BIN PG_OPTS=$PG_OPTS \
	node "$NODE_DIR/console_test.js" >&2 || { tail -n 30 "$T_TMP/console.log" >&2; fail "console_test.js"; }

C=http://127.0.0.1:$CPORT
# A Host that is not a loopback name is refused (DNS rebinding): the
# pages as well as the API; loopback names are answered.
for path in /api/overview / /app.js /api/session; do
	for host in evil.example "evil.example:$CPORT" "127.0.0.1.evil.example:$CPORT"; do
		code=$(curl -s -o "$T_TMP/host.json" -w '%{http_code}' -H "Host: $host" "$C$path")
		[ "$code" = 403 ] && grep -q 'answers only to localhost' "$T_TMP/host.json" ||
			fail "Host $host, $path: $code $(cat "$T_TMP/host.json")"
	done
done
for host in "localhost:$CPORT" "127.0.0.1:$CPORT" localhost; do
	code=$(curl -s -o /dev/null -w '%{http_code}' -H "Host: $host" "$C/api/overview")
	[ "$code" = 200 ] || fail "Host $host refused: $code"
done
# A POST from another origin is refused, whatever it carries.
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Origin: http://evil.example" \
	--data "token=$(cat "$T_TMP/token")" "$C/api/login")
[ "$code" = 403 ] || fail "a cross-origin login: $code"
# Guessing the token: after 5 wrong ones in a minute, even the right one
# waits.
for _ in 1 2 3 4 5; do
	curl -s -o /dev/null --data 'who=mallory&token=guess' "$C/api/login"
done
code=$(curl -s -o "$T_TMP/login.json" -w '%{http_code}' --data "who=alice&token=$(cat "$T_TMP/token")" "$C/api/login")
[ "$code" = 429 ] || fail "login after 5 wrong tokens: $code $(cat "$T_TMP/login.json")"
note "a foreign Host, a cross-origin POST and a 6th guess are refused"

# A deep queue costs the overview a bounded read: past 10,000 rows its
# pending is shown as at least 10,000 (pending_capped), a small one exact.
"$PGO_BIN" queue create deep >/dev/null
q "SELECT count(pgoutbox.enqueue('deep', '{}'::jsonb)) FROM generate_series(1, 10050)" >/dev/null
curl -sf -H "Host: localhost:$CPORT" "$C/api/overview" >"$T_TMP/deep.json" || fail "overview with a deep queue"
python3 - "$T_TMP/deep.json" <<'PY' || fail "the deep queue's overview: $(cat "$T_TMP/deep.json")"
import json, sys
qs = {q["name"]: q for q in json.load(open(sys.argv[1]))["queues"]}
deep, jobs = qs["deep"], qs["jobs"]
assert deep["pending"] == 10000 and deep["pending_capped"] is True, deep
assert jobs["pending_capped"] is False, jobs
PY
note "a queue of 10,050 jobs: the overview read 10,000 rows and says at least 10,000"

# The token was written in no log line.
grep -q "$(cat "$T_TMP/token")" "$T_TMP/console.log" && fail "the console logged its token"
# The console stops on SIGTERM, exit 0.
kill -TERM "$CONSOLE_PID"
rc=0; wait "$CONSOLE_PID" || rc=$?
[ "$rc" = 0 ] || fail "console exited $rc after SIGTERM: $(tail -n 20 "$T_TMP/console.log")"
stop_relay "$RELAY_PID"
echo "ok"
