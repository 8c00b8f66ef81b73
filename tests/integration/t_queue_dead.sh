# Dead letters (issue 39): `pgoutbox dead list|show|retry|discard` by ids,
# by topic/type and all; a retried job keeps its id and group and comes
# back with its attempts reset; each action is one transaction (a retry
# that cannot move one of its dead letters moves none); the older
# `queue dead` and `queue retry` still work, through the same calls.
. "$(dirname "$0")/../lib.sh"
t_db
"$PGO_BIN" queue create d >/dev/null || fail "queue create"
q "SELECT pgoutbox.enqueue('d', jsonb_build_object('i', i), topic => CASE WHEN i <= 6 THEN 'mail' ELSE 'sms' END,
                           group_key => 'g' || (i % 2)) FROM generate_series(1, 10) i" >/dev/null
"$PGO_BIN" worker --queue d --exec 'echo boom >&2; exit 3' --max-attempts 1 --poll-interval 200ms \
	--name w 2>"$T_TMP/w.log" &
W=$!; PIDS+=($!)
wait_until 30 "[ \"\$(q 'SELECT count(*) FROM pgoutbox.dead_letters')\" = 10 ]"
stop_relay "$W"
dead() { q "SELECT count(*) FROM pgoutbox.dead_letters WHERE queue = 'd'"; }

"$PGO_BIN" dead list --queue d >"$T_TMP/list" || fail "dead list"
[ "$(grep -c 'error: exit status 3' "$T_TMP/list")" = 10 ] || fail "dead list: $(cat "$T_TMP/list")"
"$PGO_BIN" dead list --queue d --topic sms --limit 100 >"$T_TMP/list" || fail "dead list --topic"
[ "$(grep -c 'error:' "$T_TMP/list")" = 4 ] || fail "dead list --topic sms: $(cat "$T_TMP/list")"
"$PGO_BIN" dead list >"$T_TMP/list" && grep -q 'd: {"i"' "$T_TMP/list" || fail "dead list (every queue): $(cat "$T_TMP/list")"
"$PGO_BIN" dead show 3 --queue d >"$T_TMP/show" || fail "dead show"
grep -q '^group  *g1$' "$T_TMP/show" && grep -q '^topic  *mail$' "$T_TMP/show" &&
	grep -q 'boom' "$T_TMP/show" || fail "dead show: $(cat "$T_TMP/show")"
"$PGO_BIN" dead show 99 --queue d 2>/dev/null && fail "dead show of no dead letter exited 0"

# Refusals before anything is done.
rc=0; "$PGO_BIN" dead retry --queue d 2>/dev/null || rc=$?
[ $rc = 2 ] || fail "retry without a filter: exit $rc, want 2"
rc=0; "$PGO_BIN" dead discard --all 2>/dev/null || rc=$?
[ $rc = 2 ] || fail "discard without --queue: exit $rc, want 2"
[ "$(dead)" = 10 ] || fail "a refused command changed the dead letters"

# Retry by ids: same id, same group, attempts 0, due now.
grep -q '^2 dead letter(s) moved back into queue d' <<<"$("$PGO_BIN" dead retry --queue d --ids 1,2)" || fail "retry --ids"
[ "$(q "SELECT string_agg(id || ':' || attempts || ':' || group_key || ':' || (run_at <= now()), ',' ORDER BY id) FROM pgoutbox.d")" = "1:0:g1:true,2:0:g0:true" ] ||
	fail "retried jobs: $(q "SELECT id, attempts, group_key, run_at FROM pgoutbox.d")"
[ "$(dead)" = 8 ] || fail "dead letters after retry --ids: $(dead)"

# One transaction: job 3 cannot go back (a job with its id is queued),
# so neither does any other of the retry.
q "INSERT INTO pgoutbox.d (id, payload) VALUES (3, '{}')" >/dev/null
"$PGO_BIN" dead retry --queue d --topic mail 2>"$T_TMP/err" && fail "retry over a taken id exited 0"
[ "$(dead)" = 8 ] || fail "a failed retry moved $((8 - $(dead))) dead letters"
q "DELETE FROM pgoutbox.d WHERE id = 3" >/dev/null

# By topic, discard by type, then all.
grep -q '^4 dead letter(s)' <<<"$("$PGO_BIN" dead retry --queue d --topic mail)" || fail "retry --topic mail"
[ "$(q "SELECT count(*) FROM pgoutbox.d")" = 6 ] || fail "jobs after retry --topic"
q "UPDATE pgoutbox.dead_letters SET type = 'bad' WHERE id IN (7, 8)" >/dev/null
grep -q '^2 dead letter(s) discarded' <<<"$("$PGO_BIN" dead discard --queue d --type bad)" || fail "discard --type"
grep -q '^1 dead letter(s) discarded' <<<"$("$PGO_BIN" dead discard --queue d --ids 9)" || fail "discard --ids"
# The older commands, the same code path.
grep -q '^10 ' <<<"$("$PGO_BIN" queue dead d)" || fail "queue dead: $("$PGO_BIN" queue dead d)"
grep -q 'dead letter 10 moved back' <<<"$("$PGO_BIN" queue retry 10 --queue d)" || fail "queue retry"
"$PGO_BIN" queue retry 10 --queue d 2>/dev/null && fail "queue retry of a dead letter no more there exited 0"
[ "$(dead)" = 0 ] || fail "dead letters left: $(dead)"
[ "$(q "SELECT string_agg(id::text, ',' ORDER BY id) FROM pgoutbox.d")" = "1,2,3,4,5,6,10" ] ||
	fail "jobs: $(q "SELECT string_agg(id::text, ',' ORDER BY id) FROM pgoutbox.d")"

# In SQL, and --all: retried jobs run and are done.
q "UPDATE pgoutbox.d SET attempts = 1" >/dev/null
q "WITH d AS (DELETE FROM pgoutbox.d RETURNING *) INSERT INTO pgoutbox.dead_letters (id, queue, topic, key, type, payload, headers, created_at, attempts, group_key) SELECT id, 'd', topic, key, type, payload, headers, created_at, attempts, group_key FROM d" >/dev/null
[ "$(q "SELECT count(*) FROM pgoutbox.dead_retry('d', ids => '{1,2}')")" = 2 ] || fail "SQL dead_retry"
grep -q '^5 dead letter(s)' <<<"$("$PGO_BIN" dead retry --queue d --all)" || fail "retry --all"
"$PGO_BIN" worker --queue d --exec true --poll-interval 200ms --name w2 2>"$T_TMP/w2.log" &
W=$!; PIDS+=($!)
wait_until 30 "[ \"\$(q 'SELECT count(*) FROM pgoutbox.d')\" = 0 ]"
stop_relay "$W"
[ "$(dead)" = 0 ] || fail "retried jobs died again"
