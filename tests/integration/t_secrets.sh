# Passwords stay out of ps, the environment and the commands pgoutbox runs
# (issue 19, item 9): --db-file and sink.redis_url_file read the URL from
# a file; the exec sink's command and a worker's --exec command do not get
# DATABASE_URL, PGOUTBOX_DATABASE_URL or PGPASSWORD.
. "$(dirname "$0")/../lib.sh"
t_db
PW=s3cretPW42
# The trust server ignores the password; the point is where it shows.
printf '%s password=%s\n' "$DATABASE_URL" "$PW" >"$T_TMP/db.secret"
chmod 600 "$T_TMP/db.secret"
url=$DATABASE_URL
q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 't', 'x', '{}' FROM generate_series(1, 20)"

# 1. --db-file: the relay connects with what the file says, and neither
# its command line nor its environment holds the password.
(unset DATABASE_URL; exec "$PGO_BIN" relay --db-file "$T_TMP/db.secret" --sink exec \
	--exec "cat >/dev/null; env > $T_TMP/env1") >"$T_TMP/r1" 2>"$T_TMP/r1.log" &
relay=$!; PIDS+=("$relay")
wait_until 20 '[ "$(pending)" = 0 ]'
tr '\0' ' ' </proc/$relay/cmdline | qgrep "$PW" && fail "the password is in the relay's command line"
tr '\0' '\n' </proc/$relay/environ | qgrep "$PW" && fail "the password is in the relay's environment"
grep -q "$PW" "$T_TMP/r1.log" && fail "the password is in the relay's log"
out=$("$PGO_BIN" config show --db-file "$T_TMP/db.secret")
grep -q "$PW" <<<"$out" && fail "config show printed the password from --db-file"
grep -q "password=\*\*\*" <<<"$out" || fail "config show: no masked password: $(grep '^url' <<<"$out")"
stop_relay "$relay"

# 2. The exec sink's command: no database credentials in its environment.
q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 't', 'x', '{}' FROM generate_series(1, 5)"
PGPASSWORD=$PW PGOUTBOX_DATABASE_URL="$url password=$PW" DATABASE_URL="$url password=$PW" \
	start_relay "$T_TMP/r2" --sink exec --exec "cat >/dev/null; env > $T_TMP/env2"
wait_until 20 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
for f in env1 env2; do
	[ -s "$T_TMP/$f" ] || fail "$f: the command did not run"
	grep -E '^(DATABASE_URL|PGOUTBOX_DATABASE_URL|PGPASSWORD)=' "$T_TMP/$f" &&
		fail "$f: the exec sink's command got database credentials"
	grep -q "$PW" "$T_TMP/$f" && fail "$f: the password reached the exec sink's command"
	grep -q '^PGOUTBOX_BATCH_SIZE=' "$T_TMP/$f" || fail "$f: the command lost its own variables"
done

# 3. A worker's --exec command: the same.
"$PGO_BIN" queue create jobs >/dev/null
"$PGO_BIN" queue enqueue jobs '{"n": 1}' >/dev/null
PGPASSWORD=$PW PGOUTBOX_DATABASE_URL="$url password=$PW" \
	"$PGO_BIN" worker --queue jobs --exec "env > $T_TMP/env3" --poll-interval 1s 2>"$T_TMP/w.log" &
w=$!; PIDS+=("$w")
wait_until 20 '[ "$(q "SELECT count(*) FROM pgoutbox.jobs")" = 0 ]'
stop_relay "$w"
[ -s "$T_TMP/env3" ] || fail "the worker's command did not run"
grep -E '^(DATABASE_URL|PGOUTBOX_DATABASE_URL|PGPASSWORD)=' "$T_TMP/env3" &&
	fail "the worker's command got database credentials"
grep -q "$PW" "$T_TMP/env3" && fail "the password reached the worker's command"

# 4. A missing or empty file is refused at start (exit 2), saying which.
rc=0; "$PGO_BIN" relay --db-file "$T_TMP/none" 2>"$T_TMP/err" || rc=$?
[ "$rc" = 2 ] && grep -q "database.url_file: cannot open $T_TMP/none" "$T_TMP/err" || fail "missing --db-file: exit $rc: $(cat "$T_TMP/err")"
: >"$T_TMP/empty"
rc=0; "$PGO_BIN" relay --sink redis --redis-file "$T_TMP/empty" 2>"$T_TMP/err" || rc=$?
[ "$rc" = 2 ] && grep -q "sink.redis_url_file: .* has an empty first line" "$T_TMP/err" || fail "empty --redis-file: exit $rc: $(cat "$T_TMP/err")"
note "--db-file: password in no argv, environ, log or command; exec and worker commands get no credentials"
