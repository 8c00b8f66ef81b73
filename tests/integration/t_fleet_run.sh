# `pgoutbox run --config FILE` with [database a] and [database b]
# sections: its relay child serves the fleet (docs/fleet.md).  50 events
# sent into each database's outbox all arrive at the stdout sink, each
# once, each with its own database's "pgoutbox-source" header; both
# outboxes drain.  The worker child serves database.url (set beside the
# sections) alone: its jobs there run.  SIGTERM ends run with 0.
. "$(dirname "$0")/../lib.sh"
N=50
for d in a b; do t_db "t_fleet_run_$d"; done
DATABASE_URL=$(pg_url t_fleet_run_a) q "SELECT pgoutbox.create_queue('jobs')" >/dev/null
CONF=$T_TMP/run.ini
cat >"$CONF" <<INI
[database]
url = $(pg_url t_fleet_run_a)

[worker]
queue = jobs
exec_command = cat >> $T_TMP/ran; echo >> $T_TMP/ran

[relay]
sink = stdout
stats_interval = 0
heartbeat = 200ms

[database a]
url = $(pg_url t_fleet_run_a)

[database b]
url = $(pg_url t_fleet_run_b)
INI
# No DATABASE_URL in the environment: the file names every database.
env -u DATABASE_URL "$PGO_BIN" run --config "$CONF" >"$T_TMP/out" 2>"$T_TMP/run.log" &
run_pid=$!
PIDS+=("$run_pid")
for d in a b; do
	DATABASE_URL=$(pg_url "t_fleet_run_$d") q "SELECT count(pgoutbox.send('t', 'k' || i, 'x',
		jsonb_build_object('db', '$d', 'n', i))) FROM generate_series(1, $N) i" >/dev/null
done
DATABASE_URL=$(pg_url t_fleet_run_a) q "SELECT count(pgoutbox.enqueue('jobs', jsonb_build_object('job', i))) FROM generate_series(1, 3) i" >/dev/null
delivered() { grep -c '"pgoutbox-source"' "$T_TMP/out" || true; }
wait_until 60 '[ "$(delivered)" -ge $((2 * N)) ] || { kill -0 $run_pid || fail "run exited: $(cat "$T_TMP/run.log")"; false; }'
for d in a b; do
	wait_until 30 '[ "$(DATABASE_URL=$(pg_url "t_fleet_run_$d") pending)" = 0 ]'
done
wait_until 30 '[ "$(grep -c "\"job\"" "$T_TMP/ran" 2>/dev/null || true)" = 3 ]'
grep -q 'relay outbox@a -> stdout' "$T_TMP/run.log" || fail "no log line names database a: $(head -20 "$T_TMP/run.log")"
stop_relay "$run_pid"
python3 - "$T_TMP/out" "$N" <<'PY' || fail "deliveries: $(head -c 800 "$T_TMP/out")"
import collections, json, sys
n = int(sys.argv[2])
seen = collections.Counter()
for line in open(sys.argv[1]):
    e = json.loads(line)
    src = e["headers"]["pgoutbox-source"]
    assert src == e["payload"]["db"], ("wrong source", src, e)
    seen[(src, e["payload"]["n"])] += 1
want = {(d, i) for d in "ab" for i in range(1, n + 1)}
assert set(seen) == want, ("lost", sorted(want - set(seen))[:5], "extra", sorted(set(seen) - want)[:5])
dup = [k for k, c in seen.items() if c > 1]
assert not dup, ("duplicated", dup[:5])
PY
note "run with 2 [database] sections: $N events of each database delivered once with its source header; its worker ran 3 jobs of database.url; SIGTERM exit 0"
