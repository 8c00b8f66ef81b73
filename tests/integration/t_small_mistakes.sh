# The small mistakes of issue 20 item 10 are refused or said plainly:
# a NUL byte in a config line, `migrate --to` an older version, `maintain
# --days` without --retention, a cron expression that never fires,
# --catch-up-max without missed catch_up (a warning), a test pattern that matches
# nothing, a misspelled flag (with a suggestion).
. "$(dirname "$0")/../lib.sh"
t_db

expect_err() {
	local want=$1 msg=$2; shift 2
	local rc=0
	"$@" >"$T_TMP/stdout" 2>"$T_TMP/stderr" || rc=$?
	[ "$rc" = "$want" ] || fail "$*: exit $rc, want $want; stderr: $(cat "$T_TMP/stderr")"
	grep -qF -- "$msg" "$T_TMP/stderr" || fail "$*: stderr lacks '$msg': $(cat "$T_TMP/stderr")"
}

printf '[relay]\nbatch = 5\0junk\n' >"$T_TMP/nul.ini"
expect_err 2 'nul.ini:2: the line holds a NUL byte' "$PGO_BIN" config show --config "$T_TMP/nul.ini"

out=$("$PGO_BIN" migrate --to 3)
grep -q "newer than --to 3: nothing done" <<<"$out" || fail "migrate --to 3 said: $out"

expect_err 2 '--days goes with --retention' "$PGO_BIN" maintain --days 3

"$PGO_BIN" queue create reports >/dev/null
expect_err 2 'never fires' "$PGO_BIN" cron add feb31 '0 3 31 2 *' --queue reports
"$PGO_BIN" cron add ignored '0 3 * * *' --queue reports --catch-up-max 3 >/dev/null 2>"$T_TMP/cu.err" ||
	fail "cron add --catch-up-max: $(cat "$T_TMP/cu.err")"
grep -q 'catch-up-max 3 is ignored with missed run_once' "$T_TMP/cu.err" || fail "no warning: $(cat "$T_TMP/cu.err")"
"$PGO_BIN" cron add daily '0 3 * * *' --queue reports --missed catch_up --catch-up-max 3 >/dev/null 2>"$T_TMP/cu.err" ||
	fail "cron add with catch_up refused"
! grep -q 'ignored' "$T_TMP/cu.err" || fail "warned with catch_up: $(cat "$T_TMP/cu.err")"
[ "$(q "SELECT count(*) FROM pgoutbox.cron_schedules")" = 2 ] || fail "schedules: $(q 'SELECT name FROM pgoutbox.cron_schedules')"

root=$(cd "$(dirname "$0")/../.." && pwd)
rc=0; (cd "$root" && env -u T_ROOT -u T_KEEP tests/run.sh "$(dirname "${PGO_BIN#"$root"/}")" no_such_test_xyz) >"$T_TMP/run.out" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q 'no test matches "no_such_test_xyz"' "$T_TMP/run.out" || fail "run.sh with no match: exit $rc: $(cat "$T_TMP/run.out")"

# A misspelled flag gets a suggestion, as a misspelled INI key does.
expect_err 2 'unknown option --bach (did you mean --batch?)' "$PGO_BIN" relay --bach 5
expect_err 2 'did you mean --concurrency?' "$PGO_BIN" worker --queue q --exec true --concurency 3

# send before migrate says to migrate.
psql -XAtq "$(pg_url postgres)" -c "DROP DATABASE IF EXISTS t_small_empty" -c "CREATE DATABASE t_small_empty" >/dev/null 2>&1
expect_err 2 'run `pgoutbox migrate`' "$PGO_BIN" send --db "$(pg_url t_small_empty)" --topic t '{}'

# The server's notices are log lines of the command, not libpq's raw
# "NOTICE:  ..." lines (here DEBUG ones, which creating a table gives).
PGOPTIONS='-c client_min_messages=debug1' "$PGO_BIN" queue create noisy >"$T_TMP/n.out" 2>"$T_TMP/n.err" ||
	fail "queue create: $(cat "$T_TMP/n.err")"
! grep -q '^\(NOTICE\|DEBUG\|WARNING\):' "$T_TMP/n.err" || fail "raw server notices: $(grep -m2 ':  ' "$T_TMP/n.err")"
