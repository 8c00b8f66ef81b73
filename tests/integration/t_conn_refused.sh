# Connection settings that can never work are refused at start, exit 2,
# the reason on the first line (issue 44 items 3 and 5): settings libpq
# refuses (sslmode=bogus, an unknown option, a service not defined), an
# authentication the server refuses (a password, a NOLOGIN role), no
# database configured; `config check` reports invalid settings without
# connecting.  An authentication refused after the relay ran is an outage
# to wait out (a password being rotated), not a stop.
. "$(dirname "$0")/../lib.sh"
t_db

# expect_refused 'message substring' command...: exit 2 within 30 s, the
# message on stderr's first line (EXPECT_LINE=any: on any line).
expect_refused() {
	local msg=$1 rc=0; shift
	timeout 30 "$@" >"$T_TMP/out" 2>"$T_TMP/err" || rc=$?
	[ "$rc" = 2 ] || fail "$*: exit $rc, want 2; stderr: $(tail -5 "$T_TMP/err")"
	if [ "${EXPECT_LINE:-first}" = first ]; then
		head -1 "$T_TMP/err" | qgrep -F -- "$msg" || fail "$*: first line lacks '$msg': $(cat "$T_TMP/err")"
	else
		grep -qF -- "$msg" "$T_TMP/err" || fail "$*: stderr lacks '$msg': $(cat "$T_TMP/err")"
	fi
}
# A worker says "started as" only once connected (src/lib/queue/worker.c).
expect_refused_worker() { expect_refused "$@"; }

# Settings libpq refuses, in database.url or a PG* variable.
for bad in "sslmode=bogus" "bogus=1" "service=t_conn_nosuch"; do
	url="$DATABASE_URL $bad"
	expect_refused "invalid connection settings: " "$PGO_BIN" relay --db "$url"
	grep -qF 'fix database.url' "$T_TMP/err" || fail "relay $bad: no fix: $(cat "$T_TMP/err")"
	expect_refused_worker "invalid connection settings: " "$PGO_BIN" worker --db "$url" --queue jobs --exec true
	rc=0; "$PGO_BIN" config check --db "$url" >"$T_TMP/out" 2>"$T_TMP/err" || rc=$?
	[ "$rc" = 2 ] && grep -q 'invalid connection settings: ' "$T_TMP/err" ||
		fail "config check $bad: exit $rc: $(cat "$T_TMP/out" "$T_TMP/err")"
done
# libpq reads connect_timeout only as it connects: refused then.
expect_refused 'invalid integer value "abc" for connection option "connect_timeout"' \
	"$PGO_BIN" relay --db "$DATABASE_URL connect_timeout=abc"
grep -qF 'invalid sslmode value: "bogus"' <("$PGO_BIN" config check --db "$DATABASE_URL sslmode=bogus" 2>&1) ||
	fail "config check does not name the sslmode"
expect_refused 'invalid sslmode value' env PGSSLMODE=bogus "$PGO_BIN" relay
"$PGO_BIN" config check >/dev/null || fail "config check refuses good settings"
"$PGO_BIN" config check --db "postgresql://u@db.example:6432/app?sslmode=require" >/dev/null ||
	fail "config check refuses a good URL"
note "invalid settings: relay and worker exit 2, config check reports them"

# Authentication: a role that may not log in, and a server refusing the
# password (a stand-in that answers every startup with 28P01).
psql -XAtq "$(pg_url postgres)" -c "DROP ROLE IF EXISTS t_conn_nologin" -c "CREATE ROLE t_conn_nologin NOLOGIN" >/dev/null
expect_refused 'is not permitted to log in' "$PGO_BIN" relay --db "${DATABASE_URL/user=postgres/user=t_conn_nologin}"
expect_refused_worker 'is not permitted to log in' "$PGO_BIN" worker --db "${DATABASE_URL/user=postgres/user=t_conn_nologin}" \
	--queue jobs --exec true
FAKE_PORT=$(pg_free_port)
python3 - "$FAKE_PORT" <<'PY' &
import socket, struct, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(16)
def read(c, n):
    b = b""
    while len(b) < n:
        x = c.recv(n - len(b))
        if not x:
            raise EOFError
        b += x
    return b
while True:
    c, _ = s.accept()
    try:
        while True:
            n, code = struct.unpack("!ii", read(c, 8))
            read(c, n - 8)
            if code in (80877103, 80877104):  # SSLRequest, GSSENCRequest
                c.sendall(b"N")
                continue
            break
        f = b"SFATAL\0VFATAL\0C28P01\0Mpassword authentication failed for user \"app\"\0\0"
        c.sendall(b"E" + struct.pack("!i", len(f) + 4) + f)
    except (EOFError, OSError):
        pass
    c.close()
PY
PIDS+=("$!")
wait_until 10 "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", $FAKE_PORT))' 2>/dev/null"
fake="host=127.0.0.1 port=$FAKE_PORT user=app dbname=app"
expect_refused 'password authentication failed for user "app"' "$PGO_BIN" relay --db "$fake"
grep -qF 'the user or password' "$T_TMP/err" || fail "no fix: $(cat "$T_TMP/err")"
[ "$(wc -l <"$T_TMP/err")" = 1 ] || fail "a refused start is more than one line: $(cat "$T_TMP/err")"
# The scheduler too: a missing database, bad settings, an unmigrated
# database stop `cron run` (it used to retry them forever).
expect_refused_worker 'database "t_conn_nosuch" does not exist' "$PGO_BIN" cron run --db "$(pg_url t_conn_nosuch)"
expect_refused_worker 'invalid connection settings: ' "$PGO_BIN" cron run --db "$DATABASE_URL sslmode=bogus"
psql -q "$(pg_url postgres)" -c 'CREATE DATABASE t_conn_bare' || fail "create t_conn_bare"
expect_refused_worker 'pgoutbox migrate' "$PGO_BIN" cron run --db "$(pg_url t_conn_bare)"
expect_refused_worker 'password authentication failed' "$PGO_BIN" worker --db "$fake" --queue jobs --exec true
expect_refused 'password authentication failed' "$PGO_BIN" relay --db "$fake" --mode concurrent
note "authentication refused at start: exit 2, the reason first"

# consume applies the same rule at its first connection (when built).
if "$PGO_BIN" consume --help >/dev/null 2>&1; then
	for db in "$DATABASE_URL sslmode=bogus" "$(pg_url t_conn_nosuch)" "$fake"; do
		EXPECT_LINE=any expect_refused "fix database.url" "$PGO_BIN" consume --db "$db" --stream s --group g --exec true
	done
	note "consume: refused at start like the relay"
fi

# A missing database: one line, the reason, nothing before it.
expect_refused 'database "t_conn_nosuch" does not exist' "$PGO_BIN" relay --db "$(pg_url t_conn_nosuch)"
[ "$(wc -l <"$T_TMP/err")" = 1 ] || fail "a refused start is more than one line: $(cat "$T_TMP/err")"

# No database configured: the commands that connect say so first.
nodb=(env -u DATABASE_URL -u PGOUTBOX_DATABASE_URL -u PGHOST -u PGPORT -u PGDATABASE -u PGSERVICE
	-u PGHOSTADDR PGUSER=t_conn_nobody)
rc=0; "${nodb[@]}" "$PGO_BIN" status >"$T_TMP/out" 2>"$T_TMP/err" || rc=$?
[ "$rc" != 0 ] && head -1 "$T_TMP/err" | qgrep '^pgoutbox: no database is configured: set database.url' ||
	fail "status without a database: exit $rc: $(cat "$T_TMP/err")"
expect_refused 'no database is configured' "${nodb[@]}" "$PGO_BIN" relay
note "no database configured: status and relay say so on their first line"

# After a good start, a refused login is waited out: the role loses
# LOGIN and its sessions, the relay logs it and stays; LOGIN back, it
# reconnects and relays again.
psql -XAtq "$(pg_url postgres)" -c "DROP ROLE IF EXISTS t_conn_rot" -c "CREATE ROLE t_conn_rot LOGIN SUPERUSER" >/dev/null
PGOUTBOX_RELAY_RECONNECT_MAX=200ms start_relay "$T_TMP/rot.out" --db "${DATABASE_URL/user=postgres/user=t_conn_rot}" \
	--mode concurrent --poll-interval 200ms
wait_until 20 '[ "$(q "SELECT count(*) FROM pg_stat_activity WHERE usename = '"'t_conn_rot'"'")" -ge 2 ]'
q "SELECT pgoutbox.send('t', 'k', 'x', '{\"n\": 1}')" >/dev/null
wait_until 20 '[ "$(pending)" = 0 ]'
q "ALTER ROLE t_conn_rot NOLOGIN" >/dev/null
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 't_conn_rot'" >/dev/null
wait_until 20 'grep -q "is not permitted to log in" "$T_TMP/rot.out.log"'
sleep 1
kill -0 "$RELAY_PID" || fail "the relay stopped on a refused login after it ran: $(cat "$T_TMP/rot.out.log")"
q "ALTER ROLE t_conn_rot LOGIN" >/dev/null
q "SELECT pgoutbox.send('t', 'k', 'x', '{\"n\": 2}')" >/dev/null
wait_until 30 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
note "a refused login after a good start is retried, and recovers"
