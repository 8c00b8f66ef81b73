# The ordered claim checks each lease's epoch (fencing): a shard whose
# epoch moved on in pgoutbox.shard_leases since the relay's last lease
# round gives that relay nothing, while its other shards go on; the next
# lease round brings the new epoch and the shard's events go out.  The
# claim looks each epoch up by shard in one array (shards.c's map), where
# it joined the leases with unnest(shards, epochs) before: this proves
# the lookup fences like the join did.
. "$(dirname "$0")/../lib.sh"
t_db
start_relay "$T_TMP/out" --mode ordered --in-flight 2 --name e --heartbeat 10s --lease-timeout 30s --log-level debug
wait_until 20 '[ "$(q "SELECT count(*) FROM pgoutbox.shard_leases WHERE owner LIKE '"'e/%'"'")" = 64 ]'
q "SELECT pgoutbox.send('t', 'warm', 'warm', '{}')" >/dev/null
wait_until 20 'grep -q "\"type\":\"warm\"" "$T_TMP/out"'
stale=$(q "SELECT pgoutbox.shard_of('stale', 0, 64)")
fresh=$(q "SELECT pgoutbox.shard_of('fresh', 0, 64)")
[ "$stale" != "$fresh" ] || fail "keys stale and fresh share shard $stale"
owner=$(q "SELECT owner FROM pgoutbox.shard_leases WHERE queue = 'outbox' AND shard = $stale")
slot=${owner#e/}
# Right after that slot's lease round: the next is 10 s away.
rounds() { grep -c "slot $slot: lease round" "$T_TMP/out.log" || true; }
n=$(rounds)
wait_until 20 '[ "$(rounds)" -gt "$n" ]'
round_at=$(date +%s%N)
q "UPDATE pgoutbox.shard_leases SET epoch = epoch + 1 WHERE queue = 'outbox' AND shard = $stale" >/dev/null
q "SELECT pgoutbox.send('t', 'stale', 'stale', '{}')" >/dev/null
q "SELECT pgoutbox.send('t', 'fresh', 'fresh', '{}')" >/dev/null
wait_until 3 'grep -q "\"type\":\"fresh\"" "$T_TMP/out"'
# Claims go on (every slot claims again after an event), none takes it.
sleep 1
[ $((($(date +%s%N) - round_at) / 1000000)) -lt 9000 ] || fail "too slow to tell: the next lease round may have come"
grep -q '"type":"stale"' "$T_TMP/out" && fail "an event of shard $stale went out under a stale epoch"
[ "$(q "SELECT count(*) FROM pgoutbox.outbox WHERE key = 'stale'")" = 1 ] || fail "the stale shard's event left the outbox"
# The next lease round brings the new epoch.
wait_until 25 'grep -q "\"type\":\"stale\"" "$T_TMP/out"'
stop_relay "$RELAY_PID"
[ "$(pending)" = 0 ] || fail "$(pending) events left"
note "shard $stale with a moved epoch gave nothing until the next lease round; shard $fresh went on"
