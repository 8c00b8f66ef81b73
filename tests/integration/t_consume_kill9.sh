# kill -9 of consumers at random moments (mid-transaction, between COMMIT
# and XACK, mid-read) while 2,000 relayed messages are applied: after
# restarts every message took effect exactly once.  Then a consumer that
# dies for good: another one of the group takes its pending entries over
# with XAUTOCLAIM.  SEED=n reproduces a run's kill times.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../redis.sh"
trap 'cleanup_pids; redis_stop' EXIT
redis_start "$T_TMP/redis"
t_db
SEED=${SEED:-$$}
RANDOM=$SEED
N=2000
q "CREATE TABLE effects (seq bigserial, n int);   -- no unique constraint: duplicates would show
   CREATE FUNCTION apply_msg(p jsonb) RETURNS void LANGUAGE sql AS
   \$\$ SELECT pg_sleep(0.002); INSERT INTO effects (n) VALUES ((p->>'n')::int) \$\$;"
q "INSERT INTO pgoutbox.outbox (topic, key, type, payload)
   SELECT 'k9', 'chat' || (i % 5), 'x', jsonb_build_object('n', i) FROM generate_series(1, $N) i"
start_relay "$T_TMP/relay" --sink redis --redis "$REDIS_URL"
wait_until 30 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"

consume=("$PGO_BIN" consume --redis "$REDIS_URL" --stream pgoutbox:k9 --group g1 --consumer c1 --sql apply_msg --count 50)
done_n() { q "SELECT count(DISTINCT n) FROM effects"; }
# Random kill -9s; every third run instead dies right after a COMMIT,
# before its XACK (--exit-after-commit), the window a random kill rarely
# hits.
# A drill asked for more commits than there are messages left waits for
# new ones: it gets 30 s, and counts only if it stopped by itself.
kills=0 drills=0 runs=0
while [ "$(done_n)" -lt $N ] && [ $runs -lt 60 ]; do
	runs=$((runs + 1))
	if [ $((runs % 3)) = 0 ]; then
		rc=0
		timeout 30 "${consume[@]}" --exit-after-commit $((RANDOM % 40 + 1)) >>"$T_TMP/c.out" 2>>"$T_TMP/c.log" || rc=$?
		[ $rc = 124 ] || drills=$((drills + 1))
		continue
	fi
	"${consume[@]}" >>"$T_TMP/c.out" 2>>"$T_TMP/c.log" &
	pid=$!; PIDS+=("$pid")
	sleep "0.$((RANDOM % 8 + 2))"
	kill -9 "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	kills=$((kills + 1))
done
before=$(done_n)
"${consume[@]}" >>"$T_TMP/c.out" 2>>"$T_TMP/c.log" &
pid=$!; PIDS+=("$pid")
wait_until 60 '[ "$(done_n)" = $N ] && [ "$(rcli XPENDING pgoutbox:k9 g1 | head -1)" = 0 ]'
kill -TERM "$pid"; wait "$pid" || fail "the last consumer exited non-zero"
twice=$(q "SELECT count(*) FROM (SELECT n FROM effects GROUP BY n HAVING count(*) > 1) x")
[ "$twice" = 0 ] || fail "$twice messages took effect more than once (seed $SEED)"
[ "$(q 'SELECT count(*) FROM effects')" = $N ] || fail "effects: $(q 'SELECT count(*) FROM effects') for $N messages"
dups=$(grep -c 'already in the inbox' "$T_TMP/c.log" || true)
[ "$dups" -ge "$drills" ] || fail "$drills exits between COMMIT and XACK but only $dups redeliveries dropped"
note "seed $SEED: $kills kill -9 and $drills exits after COMMIT ($before of $N applied by then); every message once, $dups redeliveries dropped by the inbox"

# A consumer dies for good: XAUTOCLAIM hands its entries to another.
q "TRUNCATE effects"
python3 -c "
for i in range(1, $N + 1):
    print(f\"XADD s2 * id {i} payload '{{\\\"n\\\":{i}}}'\")" | rcli >/dev/null
base=("$PGO_BIN" consume --redis "$REDIS_URL" --stream s2 --group g2 --sql apply_msg --count 200)
"${base[@]}" --consumer dead >"$T_TMP/dead.out" 2>"$T_TMP/dead.log" &
pid=$!; PIDS+=("$pid")
wait_until 20 '[ "$(done_n)" -gt 50 ]'
kill -9 "$pid"; wait "$pid" 2>/dev/null || true
held=$(rcli XPENDING s2 g2 | head -1)
[ "$held" -gt 0 ] || fail "the dead consumer held no pending entries: nothing tested"
"${base[@]}" --consumer heir --claim-idle 1s >"$T_TMP/heir.out" 2>"$T_TMP/heir.log" &
pid=$!; PIDS+=("$pid")
wait_until 60 '[ "$(done_n)" = $N ] && [ "$(rcli XPENDING s2 g2 | head -1)" = 0 ]'
kill -TERM "$pid"; wait "$pid" || fail "the heir exited non-zero"
grep -q 'took over' "$T_TMP/heir.log" || fail "no XAUTOCLAIM takeover in the log"
[ "$(q "SELECT count(*) FROM (SELECT n FROM effects GROUP BY n HAVING count(*) > 1) x")" = 0 ] ||
	fail "a taken-over message took effect twice"
note "XAUTOCLAIM: $held entries of a dead consumer taken over, all $N applied once"
