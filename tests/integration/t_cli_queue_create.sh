# `queue create --if-not-exists` (issue 44 item 10): deploy scripts
# create their queues on every run.  A queue that exists with the kind and
# shards asked for is exit 0 with "queue NAME exists"; one of another
# kind or shards is still an error (exit 2), and so is any existing
# queue without the flag (exit 1, as before).
. "$(dirname "$0")/../lib.sh"
t_db

expect() {
	local want=$1 msg=$2; shift 2
	local rc=0
	"$@" >"$T_TMP/stdout" 2>"$T_TMP/stderr" || rc=$?
	[ "$rc" = "$want" ] || fail "$*: exit $rc, want $want; $(cat "$T_TMP/stdout" "$T_TMP/stderr")"
	grep -qF -- "$msg" "$T_TMP/stdout" "$T_TMP/stderr" || fail "$*: no '$msg': $(cat "$T_TMP/stdout" "$T_TMP/stderr")"
}

grep -q -- '--if-not-exists' <<<"$("$PGO_BIN" queue create --help)" || fail "queue --help lacks --if-not-exists"
# New: created as without the flag.
expect 0 'work queue jobs created (table pgoutbox.jobs, 64 shards)' "$PGO_BIN" queue create jobs --if-not-exists
expect 0 'outbox queue events created (table pgoutbox.events, 16 shards)' \
	"$PGO_BIN" queue create events --kind outbox --shards 16 --if-not-exists
# Again: exists, nothing done, exit 0.
expect 0 'queue jobs exists' "$PGO_BIN" queue create jobs --if-not-exists
expect 0 'queue events exists' "$PGO_BIN" queue create --if-not-exists events --kind outbox --shards 16
expect 0 'queue outbox exists' "$PGO_BIN" queue create outbox --kind outbox --if-not-exists
# Another kind or other shards: an error.
expect 2 'queue jobs exists with kind work and 64 shards, not kind outbox' \
	"$PGO_BIN" queue create jobs --kind outbox --if-not-exists
expect 2 'not kind work and 8 shards' "$PGO_BIN" queue create jobs --shards 8 --if-not-exists
expect 2 'queue events exists with kind outbox and 16 shards' "$PGO_BIN" queue create events --if-not-exists
# Without the flag an existing queue fails as it did.
expect 1 'already exists' "$PGO_BIN" queue create jobs
[ "$(q "SELECT string_agg(name || ':' || kind || ':' || shards, ' ' ORDER BY name) FROM pgoutbox.queues")" = \
	"events:outbox:16 jobs:work:64 outbox:outbox:64" ] || fail "queues: $(q 'SELECT * FROM pgoutbox.queues')"
# A table of that name that is no queue is not "exists".
q "CREATE TABLE pgoutbox.stray (id int)"
expect 1 'stray' "$PGO_BIN" queue create stray --if-not-exists
