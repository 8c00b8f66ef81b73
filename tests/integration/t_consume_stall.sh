# consume's database connection through a TCP proxy that stops
# forwarding (SIGSTOP: the kernel keeps accepting and ACKing, so nothing
# closes; what a host that vanished without a word looks like, short of
# TCP's own timeouts).  consume notices within --request-timeout, says so,
# tries again (its connects through the stalled proxy give up after
# database.connect_timeout), and once the proxy forwards again every
# message is applied exactly once: the transaction the stall cut short
# rolls back or, its COMMIT delivered late, is dropped by the inbox.
# Then SIGTERM during a stall ends consume within 2 s, exit 0.
# serial: timing-sensitive, run alone (tests/run.sh)
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../redis.sh"
trap 'cleanup_pids; redis_stop' EXIT
redis_start "$T_TMP/redis"
t_db
q "CREATE TABLE effects (seq bigserial, n int);   -- no unique constraint: duplicates would show
   CREATE FUNCTION apply_msg(p jsonb) RETURNS void LANGUAGE sql AS
   \$\$ SELECT pg_sleep(0.005); INSERT INTO effects (n) VALUES ((p->>'n')::int) \$\$;"
python3 "$(dirname "$0")/../tcp_proxy.py" "$PG_PORT" "$T_TMP/proxy.port" &
PROXY=$!
PIDS+=("$PROXY")
wait_until 10 "[ -s '$T_TMP/proxy.port' ]"
PROXY_URL="host=127.0.0.1 port=$(cat "$T_TMP/proxy.port") user=postgres dbname=$(basename "$0" .sh)"
xadd() { # first, last
	python3 -c "
for i in range($1, $2 + 1):
    print(f\"XADD s1 * id {i} payload '{{\\\"n\\\":{i}}}'\")" | rcli >/dev/null
}
applied() { q "SELECT count(DISTINCT n) FROM effects"; }
N=600
xadd 1 $N
export PGOUTBOX_DATABASE_CONNECT_TIMEOUT=2s
consume=("$PGO_BIN" consume --db "$PROXY_URL" --redis "$REDIS_URL" --stream s1
	--group g1 --consumer c1 --sql apply_msg --count 20)
"${consume[@]}" --request-timeout 2s >"$T_TMP/c1.out" 2>"$T_TMP/c1.log" &
c1=$!; PIDS+=("$c1")
wait_until 30 '[ "$(applied)" -ge 100 ]'
kill -STOP "$PROXY"
stalled=$(date +%s%N)
wait_until 10 'grep -q "no reply from PostgreSQL within 2000 ms" "$T_TMP/c1.log"'
noticed=$((($(date +%s%N) - stalled) / 1000000))
[ "$noticed" -le 4000 ] || fail "the stall noticed after $noticed ms, --request-timeout 2s"
# Its reconnects through the stalled proxy give up too; the process lives.
wait_until 10 'grep -q "no answer to connecting within 2000 ms" "$T_TMP/c1.log"'
kill -0 "$c1" || fail "consume died during the stall: $(tail -5 "$T_TMP/c1.log")"
during=$(applied)
kill -CONT "$PROXY"
wait_until 60 '[ "$(applied)" = $N ] && [ "$(rcli XPENDING s1 g1 | head -1)" = 0 ]'
grep -q "connected to" "$T_TMP/c1.log" || fail "no reconnection logged: $(tail -5 "$T_TMP/c1.log")"
lines=$(grep -c "no reply from PostgreSQL\|no answer to connecting" "$T_TMP/c1.log" || true)
kill -TERM "$c1"; wait "$c1" || fail "consume exited non-zero after SIGTERM"
[ "$(q "SELECT count(*) FROM (SELECT n FROM effects GROUP BY n HAVING count(*) > 1) x")" = 0 ] ||
	fail "a message took effect twice"
[ "$(q 'SELECT count(*) FROM effects')" = $N ] || fail "effects: $(q 'SELECT count(*) FROM effects') for $N messages"
note "stall noticed in $noticed ms (--request-timeout 2s), $during of $N applied by then, $lines lines about it; after the stall every message once"

# SIGTERM while consume waits on the stalled database: it gives the reply
# half a second, rolls back and exits 0 (no --request-timeout to help).
xadd $((N + 1)) $((2 * N))
"${consume[@]}" --request-timeout 1m >"$T_TMP/c2.out" 2>"$T_TMP/c2.log" &
c2=$!; PIDS+=("$c2")
wait_until 30 "[ \"\$(applied)\" -ge $((N + 100)) ]"
kill -STOP "$PROXY"
sleep 0.5 # consume's next request is sent into the stall
start=$(date +%s%N)
kill -TERM "$c2"
rc=0
wait_until 5 '! kill -0 "$c2" 2>/dev/null'
took=$((($(date +%s%N) - start) / 1000000))
wait "$c2" || rc=$?
kill -CONT "$PROXY"
[ "$rc" = 0 ] || fail "consume exited $rc after SIGTERM during the stall"
[ "$took" -le 2000 ] || fail "SIGTERM during the stall took $took ms"
"${consume[@]}" >"$T_TMP/c3.out" 2>"$T_TMP/c3.log" &
c3=$!; PIDS+=("$c3")
wait_until 60 "[ \"\$(applied)\" = $((2 * N)) ] && [ \"\$(rcli XPENDING s1 g1 | head -1)\" = 0 ]"
kill -TERM "$c3"; wait "$c3" || fail "the last consumer exited non-zero"
[ "$(q "SELECT count(*) FROM (SELECT n FROM effects GROUP BY n HAVING count(*) > 1) x")" = 0 ] ||
	fail "a message took effect twice after the SIGTERM"
[ "$(q 'SELECT count(*) FROM effects')" = $((2 * N)) ] || fail "effects: $(q 'SELECT count(*) FROM effects') for $((2 * N)) messages"
note "SIGTERM during a stall: exit 0 in $took ms; the rest applied once by the next consumer"
