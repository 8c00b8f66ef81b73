# What the CLI shows users (issue 44 item 13): --help leaves out the
# test-only flags (cron --clock-offset, consume --exit-after-commit),
# which still work; adopt and unadopt take --db-file like the other
# commands; errors name what is missing or wrong: send's PAYLOAD, retry's
# --queue, a single send's field over its cap without "event 0".
. "$(dirname "$0")/../lib.sh"
t_db

expect_err() {
	local want=$1 msg=$2; shift 2
	local rc=0
	"$@" >"$T_TMP/stdout" 2>"$T_TMP/stderr" || rc=$?
	[ "$rc" = "$want" ] || fail "$*: exit $rc, want $want; stderr: $(cat "$T_TMP/stderr")"
	grep -qF -- "$msg" "$T_TMP/stderr" || fail "$*: stderr lacks '$msg': $(cat "$T_TMP/stderr")"
}

# Test-only flags: not in --help, still accepted.
"$PGO_BIN" cron --help >"$T_TMP/cron.help"
grep -q -- '--grace' "$T_TMP/cron.help" || fail "cron --help lacks --grace"
! grep -q -- '--clock-offset' "$T_TMP/cron.help" || fail "cron --help shows --clock-offset"
expect_err 2 '--clock-offset "soon"' "$PGO_BIN" cron run --clock-offset soon
if grep -q '^  consume ' <<<"$("$PGO_BIN" --help)"; then
	"$PGO_BIN" consume --help >"$T_TMP/consume.help"
	grep -q -- '--dedup-window' "$T_TMP/consume.help" || fail "consume --help lacks --dedup-window"
	! grep -q -- '--exit-after-commit' "$T_TMP/consume.help" || fail "consume --help shows --exit-after-commit"
	expect_err 2 '--exit-after-commit "0" must be a whole number' \
		"$PGO_BIN" consume --stream s --group g --exec true --exit-after-commit 0
fi
# A misspelling is not steered to a hidden flag.
expect_err 2 'unknown option --clock-ofset (see' "$PGO_BIN" cron run --clock-ofset 1s

# adopt and unadopt read the URL from --db-file.
q "CREATE TABLE app_outbox (id bigserial PRIMARY KEY, aggregatetype text NOT NULL,
   aggregateid text, type text NOT NULL DEFAULT '', payload jsonb NOT NULL)"
printf '%s\n' "$DATABASE_URL" >"$T_TMP/db.url"
for c in adopt unadopt; do
	grep -q -- '--db-file' <<<"$("$PGO_BIN" "$c" --help)" || fail "$c --help lacks --db-file"
done
(unset DATABASE_URL; "$PGO_BIN" adopt public.app_outbox --name app --db-file "$T_TMP/db.url") \
	>"$T_TMP/adopt.out" 2>&1 || fail "adopt --db-file: $(cat "$T_TMP/adopt.out")"
[ "$(q "SELECT pgoutbox.queue_kind('app')")" = adopted ] || fail "adopt --db-file adopted nothing"
(unset DATABASE_URL; "$PGO_BIN" unadopt app --db-file "$T_TMP/db.url") \
	>"$T_TMP/unadopt.out" 2>&1 || fail "unadopt --db-file: $(cat "$T_TMP/unadopt.out")"
[ -z "$(q "SELECT pgoutbox.queue_kind('app')")" ] || fail "unadopt --db-file left the queue"

# Errors that say what is missing.
expect_err 2 'missing argument PAYLOAD' "$PGO_BIN" send --topic t
expect_err 2 '--queue is required' "$PGO_BIN" queue retry 5
expect_err 2 'usage: pgoutbox queue stats NAME' "$PGO_BIN" queue stats
expect_err 2 'missing argument SCHEMA.TABLE' "$PGO_BIN" adopt --name x
topic=$(printf 't%.0s' $(seq 300))
expect_err 2 'topic is 300 bytes' "$PGO_BIN" send --topic "$topic" '{}'
! grep -q 'event 0' "$T_TMP/stderr" || fail "a single send says 'event 0': $(cat "$T_TMP/stderr")"
[ "$(pending)" = 0 ] || fail "a refused send wrote an event"
