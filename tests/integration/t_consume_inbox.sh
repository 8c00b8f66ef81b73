# pgoutbox consume: duplicates injected into the stream are skipped by the
# inbox and each message's effect happens exactly once (counted in a table
# without a unique constraint, which would hide duplicates); a failing
# handler is retried before newer messages; a poison message is skipped
# after --max-attempts; --exit-after-commit stops between COMMIT and XACK
# and the redelivery is dropped; SIGTERM stops at once with exit 0.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../redis.sh"
trap 'cleanup_pids; redis_stop' EXIT
redis_start "$T_TMP/redis"
t_db
q "CREATE SEQUENCE fail_50;
   CREATE TABLE effects (seq bigserial, n int, payload jsonb);
   CREATE FUNCTION apply_msg(p jsonb) RETURNS void LANGUAGE plpgsql AS \$\$
   BEGIN
       -- nextval is not rolled back: message 50 fails twice, then works.
       IF (p->>'n')::int = 50 AND nextval('fail_50') <= 2 THEN
           RAISE EXCEPTION 'message 50 is not ready yet';
       END IF;
       INSERT INTO effects (n, payload) VALUES ((p->>'n')::int, p);
   END \$\$;"
N=300
python3 - "$N" >"$T_TMP/xadd.txt" <<'EOF'
import sys
n = int(sys.argv[1])
for i in range(1, n + 1):
    print(f"XADD s1 * id {i} topic t key k{i % 7} type x payload '{{\"n\":{i}}}' headers '{{}}' created_at now")
    if i % 7 == 0:  # a duplicate of an earlier message, as a relay re-send makes
        j = i - 3
        print(f"XADD s1 * id {j} topic t key k{j % 7} type x payload '{{\"n\":{j}}}' headers '{{}}' created_at now")
EOF
rcli <"$T_TMP/xadd.txt" >/dev/null
dups=$((N / 7))

# An array, not a function: "$!" of a backgrounded function is a subshell.
consume=("$PGO_BIN" consume --redis "$REDIS_URL")
"${consume[@]}" --stream s1 --group g1 --sql apply_msg >"$T_TMP/c1.out" 2>"$T_TMP/c1.log" &
c1=$!; PIDS+=("$c1")
wait_until 30 '[ "$(q "SELECT count(*) FROM effects")" = $N ]'
wait_until 10 '[ "$(rcli XPENDING s1 g1 | head -1)" = 0 ]'
start=$SECONDS
kill -TERM "$c1"; rc=0; wait "$c1" || rc=$?
[ "$rc" = 0 ] || fail "consume exited $rc after SIGTERM"
[ $((SECONDS - start)) -le 2 ] || fail "SIGTERM while blocked took $((SECONDS - start)) s"
grep -q "processed $N, duplicates skipped $dups, failed 2" "$T_TMP/c1.log" ||
	fail "stats line: $(grep 'pgoutbox consume:' "$T_TMP/c1.log")"
[ "$(q "SELECT count(*) FROM (SELECT n FROM effects GROUP BY n HAVING count(*) <> 1) x")" = 0 ] ||
	fail "some message took effect more than once"
[ "$(q "SELECT count(DISTINCT n) FROM effects")" = $N ] || fail "some message took no effect"
# Message 50 failed twice and was retried before 51 and later.
[ "$(q "SELECT bool_and(ok) FROM (SELECT n > lag(n, 1, 0) OVER (ORDER BY seq) AS ok FROM effects) x")" = t ] ||
	fail "effects out of stream order: $(q "SELECT string_agg(n::text, ' ' ORDER BY seq) FROM effects" | head -c 300)"
grep -q 'message 50 is not ready yet' "$T_TMP/c1.log" || fail "the handler failure was not logged"
note "sql handler: $N effects exactly once, $dups duplicates skipped, 2 failures retried in order"

# The exec handler: the message as JSON on stdin, in a group of its own.
"${consume[@]}" --stream s1 --group g2 --exec "cat >>'$T_TMP/exec.ndjson'" >"$T_TMP/c2.out" 2>"$T_TMP/c2.log" &
c2=$!; PIDS+=("$c2")
wait_until 30 '[ "$(wc -l <"$T_TMP/exec.ndjson" 2>/dev/null || echo 0)" = $N ]'
wait_until 10 '[ "$(rcli XPENDING s1 g2 | head -1)" = 0 ]'
kill -TERM "$c2"; wait "$c2" || fail "consume --exec exited non-zero"
python3 - "$T_TMP/exec.ndjson" "$N" <<'EOF' || fail "exec handler input is wrong"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
# The event id is a JSON number, as in the relay's NDJSON.
assert all(type(m['id']) is int for m in lines), lines[0]
ids = [m['id'] for m in lines]
assert ids == list(range(1, int(sys.argv[2]) + 1)), ids[:20]
m = lines[9]
assert m['payload'] == {'n': 10} and m['key'] == 'k3' and m['topic'] == 't', m
assert m['type'] == 'x' and m['headers'] == {} and '-' in m['entry_id'], m
EOF

# A poison message: skipped after --max-attempts, left pending, logged.
rcli XADD s2 '*' id 1 payload '{}' >/dev/null
rcli XADD s2 '*' id 2 payload '{}' >/dev/null
rcli XADD s2 '*' id 3 payload '{}' >/dev/null
"${consume[@]}" --stream s2 --group g3 --max-attempts 3 \
	--exec '[ "$PGOUTBOX_MESSAGE_ID" != 2 ] && echo "$PGOUTBOX_MESSAGE_ID" >>'"'$T_TMP/poison.txt'" \
	>"$T_TMP/c3.out" 2>"$T_TMP/c3.log" &
c3=$!; PIDS+=("$c3")
wait_until 20 'grep -q "failed 3 times: skipping it" "$T_TMP/c3.log"'
wait_until 10 '[ "$(cat "$T_TMP/poison.txt" 2>/dev/null | tr "\n" " ")" = "1 3 " ]'
kill -TERM "$c3"; wait "$c3" || fail "consume exited non-zero"
[ "$(rcli XPENDING s2 g3 | head -1)" = 1 ] || fail "the poison message is not left pending"
grep -q 'skipped 1' "$T_TMP/c3.log" || fail "stats do not count the skipped message"

# --exit-after-commit: the crash window between COMMIT and XACK.
q "TRUNCATE effects"
for i in 1 2 3 4; do rcli XADD s3 '*' id "$i" payload "{\"n\": $i}" >/dev/null; done
rc=0
"${consume[@]}" --stream s3 --group g4 --sql apply_msg --exit-after-commit 2 \
	>"$T_TMP/c4.out" 2>"$T_TMP/c4.log" || rc=$?
[ "$rc" = 3 ] || fail "--exit-after-commit exited $rc, not 3"
[ "$(q "SELECT string_agg(n::text, ' ' ORDER BY seq) FROM effects")" = "1 2" ] || fail "effects before the drill exit"
# 2 committed but not acked; 3 and 4 read (COUNT 100) but not handled.
[ "$(rcli XPENDING s3 g4 | head -1)" = 3 ] || fail "messages 2-4 should be pending"
"${consume[@]}" --stream s3 --group g4 --sql apply_msg >"$T_TMP/c5.out" 2>"$T_TMP/c5.log" &
c5=$!; PIDS+=("$c5")
wait_until 20 '[ "$(rcli XPENDING s3 g4 | head -1)" = 0 ] && [ "$(q "SELECT count(*) FROM effects")" = 4 ]'
kill -TERM "$c5"; wait "$c5" || fail "consume exited non-zero"
grep -q 'event 2 (entry .*) again: already in the inbox, skipped' "$T_TMP/c5.log" || fail "the redelivery of 2 was not dropped"
[ "$(q "SELECT string_agg(n::text, ' ' ORDER BY seq) FROM effects")" = "1 2 3 4" ] || fail "effects after the restart"

# Bad usage: exit 2 with a reason, before touching anything.
usage() {
	local want=$1 rc=0; shift
	"${consume[@]}" --stream s1 --group g9 "$@" >/dev/null 2>"$T_TMP/usage.err" || rc=$?
	[ "$rc" = 2 ] || fail "consume $* exited $rc, not 2"
	grep -q "$want" "$T_TMP/usage.err" || fail "consume $*: no \"$want\" in $(cat "$T_TMP/usage.err")"
}
usage 'not a function name' --sql 'apply_msg(); DROP TABLE effects; --'
usage 'exactly one handler'
usage 'exactly one handler' --sql apply_msg --exec cat
usage 'not a duration' --sql apply_msg --claim-idle soon
usage 'TLS' --sql apply_msg --redis "rediss://127.0.0.1:$REDIS_PORT"
# A --sql function that does not exist (a typo), or not with one jsonb
# argument, is refused at start: not retried and skipped message by message.
rcli XADD s9 '*' id 9001 topic t key k type x payload '{"n":9001}' headers '{}' created_at now >/dev/null
q "CREATE SCHEMA billing; CREATE FUNCTION billing.apply_order(p jsonb, n int) RETURNS void LANGUAGE sql AS 'SELECT'"
for f in aply_msg billing.aply_order billing.apply_order; do
	rc=0
	timeout 20 "${consume[@]}" --stream s9 --group g9 --sql "$f" >/dev/null 2>"$T_TMP/nofunc.err" || rc=$?
	[ "$rc" = 2 ] || fail "consume --sql $f exited $rc, not 2: $(cat "$T_TMP/nofunc.err")"
	grep -q "no function .*(jsonb) in this database" "$T_TMP/nofunc.err" || fail "consume --sql $f: $(cat "$T_TMP/nofunc.err")"
done
grep -q 'there is only billing.apply_order(jsonb,integer)' "$T_TMP/nofunc.err" || fail "no hint at the other signature: $(cat "$T_TMP/nofunc.err")"
pend=$(rcli XPENDING s9 g9 2>&1 | head -1)
[ "$pend" = 0 ] || [[ "$pend" == NOGROUP* ]] || fail "a consumer with no function read the stream: $pend"

for cmd in consume inbox; do
	"$PGO_BIN" "$cmd" --help >"$T_TMP/help" || fail "$cmd --help exited non-zero"
	grep -q "usage: pgoutbox $cmd" "$T_TMP/help" || fail "$cmd --help has no usage line"
done
grep -q consume <<<"$("$PGO_BIN" --help)" || fail "pgoutbox --help does not list consume"
