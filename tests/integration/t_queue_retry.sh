# Retries follow the backoff (run_at) and end in dead letters with the
# error and the stderr tail; a timeout kills the whole process group;
# `queue` commands list, show, retry and purge; bad names are refused;
# `queue enqueue --group` gives the job its group.
. "$(dirname "$0")/../lib.sh"
t_db
"$PGO_BIN" queue create flaky >/dev/null || fail "queue create"
rc=0; "$PGO_BIN" queue create 'Bad-Name' 2>"$T_TMP/err" || rc=$?
[ "$rc" = 2 ] && grep -q "must start with a lower-case\|has '-'" "$T_TMP/err" || fail "bad name: $rc $(cat "$T_TMP/err")"
rc=0; "$PGO_BIN" queue create flaky 2>"$T_TMP/err" || rc=$?
[ "$rc" = 1 ] && grep -q 'already exists' "$T_TMP/err" || fail "duplicate: $rc $(cat "$T_TMP/err")"
rc=0; q "SELECT pgoutbox.create_queue('x; drop table y')" 2>"$T_TMP/err" || rc=$?
[ "$rc" != 0 ] && grep -q 'invalid queue name' "$T_TMP/err" || fail "SQL accepted a bad name"
rc=0; q "SELECT pgoutbox.enqueue('nope', '{}')" 2>"$T_TMP/err" || rc=$?
[ "$rc" != 0 ] && grep -q 'no work queue named "nope"' "$T_TMP/err" || fail "enqueue to a missing queue: $(cat "$T_TMP/err")"
# unique keys: one queued job per key
a=$(q "SELECT pgoutbox.enqueue('flaky', '{\"n\": 1}', unique_key => 'k1')")
b=$(q "SELECT pgoutbox.enqueue('flaky', '{\"n\": 2}', unique_key => 'k1')")
[ "$a" = "$b" ] || fail "unique key: $a then $b"
q "DELETE FROM pgoutbox.flaky" >/dev/null
# --group (pgo_job_opts_t.group_key): the job's group, none without it.
g=$("$PGO_BIN" queue enqueue flaky '{}' --group tenant-7 --priority 3) || fail "enqueue --group"
[ "$(q "SELECT group_key || '/' || priority FROM pgoutbox.flaky WHERE id = $g")" = tenant-7/3 ] ||
	fail "enqueue --group: $(q "SELECT group_key, priority FROM pgoutbox.flaky WHERE id = $g")"
g=$("$PGO_BIN" queue enqueue flaky '{}') || fail "enqueue without --group"
[ "$(q "SELECT group_key IS NULL FROM pgoutbox.flaky WHERE id = $g")" = t ] || fail "a group without --group"
grep -q -- '--group KEY' <<<"$("$PGO_BIN" queue enqueue --help)" || fail "enqueue --help does not name --group"
q "DELETE FROM pgoutbox.flaky" >/dev/null

id=$("$PGO_BIN" queue enqueue flaky '{"n": 3}')
"$PGO_BIN" worker --queue flaky --exec 'echo "line one" >&2; echo "attempt $PGOUTBOX_JOB_ATTEMPT failed" >&2; exit 4' \
	--max-attempts 3 --retry-base 2s --poll-interval 5s --name r 2>"$T_TMP/r.log" &
R=$!; PIDS+=($!)
# attempts counts a claim: wait for the failure to be recorded too.
wait_until 10 "[ \"\$(q \"SELECT attempts, last_error IS NOT NULL FROM pgoutbox.flaky WHERE id = $id\")\" = '1|t' ]"
# The backoff of attempt 1 is 1-2 s (--retry-base 2s, halved jitter): the
# check has a second before attempt 2, however loaded the host.
row=$(q "SELECT last_error, run_at > now() + interval '100 ms', run_at < now() + interval '2050 ms', locked_by IS NULL FROM pgoutbox.flaky WHERE id = $id")
[ "$row" = "exit status 4; stderr: line one
attempt 1 failed|t|t|t" ] || fail "after attempt 1: $row"
wait_until 20 "[ \"\$(q 'SELECT count(*) FROM pgoutbox.dead_letters')\" = 1 ]"
stop_relay "$R"
row=$(q "SELECT id, queue, attempts, last_error FROM pgoutbox.dead_letters")
[ "$row" = "$id|flaky|3|exit status 4; stderr: line one
attempt 3 failed" ] || fail "dead letter: $row"
# backoff: attempt 2 came >= 1 s after attempt 1, attempt 3 >= 2 s after 2
python3 - "$T_TMP/r.log" <<'PY' || fail "backoff not followed: $(grep 'failed' "$T_TMP/r.log")"
import re, sys, datetime
ts = [datetime.datetime.fromisoformat(l[:23]) for l in open(sys.argv[1]) if re.search(r'attempt \d failed|dead-lettered', l)]
assert len(ts) == 3, ts
assert (ts[1] - ts[0]).total_seconds() >= 1.0 and (ts[2] - ts[1]).total_seconds() >= 2.0, ts
PY
"$PGO_BIN" queue dead flaky | qgrep 'attempt 3 failed' || fail "queue dead: $("$PGO_BIN" queue dead flaky)"
"$PGO_BIN" queue list | qgrep '^flaky  *work  *0  *0  *1 ' || fail "queue list: $("$PGO_BIN" queue list)"
"$PGO_BIN" queue retry "$id" --queue flaky | qgrep 'moved back' || fail "retry"
[ "$(q "SELECT attempts, payload FROM pgoutbox.flaky WHERE id = $id")" = '0|{"n": 3}' ] || fail "retried job"
"$PGO_BIN" queue stats flaky | qgrep 'ready  *1' || fail "stats: $("$PGO_BIN" queue stats flaky)"
rc=0; "$PGO_BIN" queue purge flaky 2>"$T_TMP/err" || rc=$?
[ "$rc" = 2 ] && grep -q -- '--yes' "$T_TMP/err" || fail "purge without --yes: $rc"
"$PGO_BIN" queue purge flaky --yes | qgrep 'purged 1 job' || fail "purge"

# A timeout kills the whole process group (the grandchild too).
id=$("$PGO_BIN" queue enqueue flaky '{}')
"$PGO_BIN" worker --queue flaky --exec "sh -c 'sleep 1.5; touch $T_TMP/survived' & wait" \
	--timeout 500ms --max-attempts 1 --name t 2>"$T_TMP/t.log" &
T=$!; PIDS+=($!)
wait_until 10 "[ \"\$(q 'SELECT count(*) FROM pgoutbox.dead_letters')\" = 1 ]"
stop_relay "$T"
sleep 2
[ -e "$T_TMP/survived" ] && fail "the grandchild survived the timeout"
q "SELECT last_error FROM pgoutbox.dead_letters" | qgrep 'timed out after 500 ms' || fail "timeout error: $(q 'SELECT last_error FROM pgoutbox.dead_letters')"
