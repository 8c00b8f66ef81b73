# A start that cannot succeed is refused with what to do and exit 2
# (issue 20 item 5), instead of retrying silently forever: a database
# that does not exist, a database never migrated or migrated to an older
# version (the reason on the first line), a queue that does not
# exist (relay and worker), no database configured at all; `pgoutbox
# run` stops instead of restarting such a worker.  A server that is only
# unreachable is retried, and the reason is logged again while it lasts.
. "$(dirname "$0")/../lib.sh"
t_db

# expect_exit CODE 'message substring' command...: within 60 s.
expect_exit() {
	local want=$1 msg=$2; shift 2
	local rc=0
	timeout 60 "$@" >"$T_TMP/stdout" 2>"$T_TMP/stderr" || rc=$?
	[ "$rc" = "$want" ] || fail "$*: exit $rc, want $want; stderr: $(tail -5 "$T_TMP/stderr")"
	grep -qF -- "$msg" "$T_TMP/stderr" || fail "$*: stderr lacks '$msg': $(tail -5 "$T_TMP/stderr")"
}

expect_exit 2 'database "t_start_nosuch" does not exist' \
	"$PGO_BIN" relay --db "$(pg_url t_start_nosuch)"
expect_exit 2 'fix database.url' "$PGO_BIN" worker --db "$(pg_url t_start_nosuch)" --queue jobs --exec true

psql -XAtq "$(pg_url postgres)" -c "DROP DATABASE IF EXISTS t_start_empty" -c "CREATE DATABASE t_start_empty" >/dev/null
expect_exit 2 'run `pgoutbox migrate`' "$PGO_BIN" relay --db "$(pg_url t_start_empty)"
head -1 "$T_TMP/stderr" | qgrep -F 'run `pgoutbox migrate`' || fail "never migrated: not the first line: $(cat "$T_TMP/stderr")"
# An older schema at start: a step left out, refused (issue 44 item 4:
# the relay and the worker used to retry it forever).
"$PGO_BIN" migrate --db "$(pg_url t_start_empty)" --to 10 >/dev/null 2>&1 || fail "migrate --to 10"
expect_exit 2 'the database schema is version 10' "$PGO_BIN" relay --db "$(pg_url t_start_empty)"
head -1 "$T_TMP/stderr" | qgrep -F 'the database schema is version 10' || fail "older schema: not the first line: $(cat "$T_TMP/stderr")"
expect_exit 2 'run `pgoutbox migrate`' "$PGO_BIN" worker --db "$(pg_url t_start_empty)" --queue outbox --exec true

expect_exit 2 'relay.queue "nosuch" is not a queue' "$PGO_BIN" relay --queue nosuch
expect_exit 2 'pgoutbox queue create nosuch' "$PGO_BIN" worker --queue nosuch --exec true

# Nothing configured: no URL and no PG* variable (the default socket
# directory holds no server of ours).
expect_exit 2 'no database is configured' env -u DATABASE_URL -u PGHOST -u PGPORT \
	-u PGDATABASE -u PGSERVICE -u PGHOSTADDR PGUSER=t_start_nobody "$PGO_BIN" relay

# run: a worker whose queue does not exist is not restarted.
printf '[worker]\nqueue = nosuch\nexec_command = true\n' >"$T_TMP/run.ini"
expect_exit 2 'cannot run with this configuration' "$PGO_BIN" run --no-relay --config "$T_TMP/run.ini"
[ "$(grep -c 'worker started' "$T_TMP/stderr")" = 1 ] || fail "run restarted the worker: $(cat "$T_TMP/stderr")"

# An unreachable server is an outage: retried, and said again while it
# lasts (here after 10 attempts of a 100 ms backoff), "cannot connect"
# since it never connected.
PGOUTBOX_RELAY_RECONNECT_MAX=100ms "$PGO_BIN" relay --db "host=127.0.0.1 port=1 connect_timeout=2" \
	>"$T_TMP/down.out" 2>"$T_TMP/down.log" &
pid=$!
PIDS+=("$pid")
wait_until 30 '[ "$(grep -c "still cannot connect" "$T_TMP/down.log")" -ge 2 ]'
kill -0 "$pid" || fail "the relay gave up on an unreachable server: $(cat "$T_TMP/down.log")"
grep -q 'cannot connect: .*refused' "$T_TMP/down.log" || fail "no reason logged: $(cat "$T_TMP/down.log")"
! grep -q 'connection lost' "$T_TMP/down.log" || fail "'connection lost' though it never connected"
stop_relay "$pid"
