# Lease mode crashes.  (1) A worker killed with kill -9 while its job runs:
# the job is retried by another worker once the lease expires.  (2) A
# worker frozen (SIGSTOP) past its lease: another worker takes the job
# over (new epoch) and completes it; when the old worker resumes, its
# completion affects no row (epoch mismatch).  The job ran twice, and is
# recorded as completed once, by the second worker.
. "$(dirname "$0")/../lib.sh"
t_db
"$PGO_BIN" queue create long >/dev/null || fail "queue create"
cleanup_groups() {
	cleanup_pids
	pkill -9 -f "$T_TMP/job" 2>/dev/null || true
}
trap cleanup_groups EXIT
cat >"$T_TMP/job.sh" <<SH
#!/bin/sh
echo "start \$PGOUTBOX_JOB_ID \$PGOUTBOX_JOB_ATTEMPT \$WORKER" >> $T_TMP/runs
sleep 2
echo "end \$PGOUTBOX_JOB_ID \$PGOUTBOX_JOB_ATTEMPT \$WORKER" >> $T_TMP/runs
SH
chmod +x "$T_TMP/job.sh"
work() { # name, extra args
	local n=$1; shift
	WORKER=$n "$PGO_BIN" worker --queue long --exec "$T_TMP/job.sh" --lease 1500ms \
		--timeout 10s --reap-interval 300ms --poll-interval 200ms --name "$n" "$@" 2>"$T_TMP/$n.log" &
	LAST=$!; PIDS+=($!)
}

# (1) kill -9
id=$(q "SELECT pgoutbox.enqueue('long', '{\"n\": 1}')")
work a
A=$LAST
wait_until 10 "grep -q 'start $id 1 a' $T_TMP/runs 2>/dev/null"
kill -9 "$A"
[ "$(q "SELECT locked_by FROM pgoutbox.long WHERE id = $id")" = a ] || fail "job not leased by a"
work b
B=$LAST
wait_until 20 "grep -q 'end $id 2 b' $T_TMP/runs"
wait_until 5 "[ \"\$(q 'SELECT count(*) FROM pgoutbox.long')\" = 0 ]"
stop_relay "$B"
grep -q 'stopped: done 1,' "$T_TMP/b.log" || fail "b did not record the job: $(tail -3 "$T_TMP/b.log")"
grep -q 'expired lease' "$T_TMP/b.log" || note "the lease was taken by the claim before the reaper saw it"
sleep 1
[ "$(grep -c "^start $id " "$T_TMP/runs")" = 2 ] || fail "kill -9: job started $(grep -c "^start $id " "$T_TMP/runs") times, want 2"

# (2) SIGSTOP past the lease, then SIGCONT
: >"$T_TMP/runs"
id=$(q "SELECT pgoutbox.enqueue('long', '{\"n\": 2}')")
work old
OLD=$LAST
wait_until 10 "grep -q 'start $id 1 old' $T_TMP/runs 2>/dev/null"
kill -STOP "$OLD"
work new
NEW=$LAST
wait_until 20 "grep -q 'end $id 2 new' $T_TMP/runs"
wait_until 5 "[ \"\$(q 'SELECT count(*) FROM pgoutbox.long')\" = 0 ]"
grep -q "end $id 1 old" "$T_TMP/runs" || fail "the old worker's job did not finish meanwhile"
kill -CONT "$OLD"
wait_until 10 "grep -q 'lease lost' $T_TMP/old.log"
stop_relay "$OLD"
stop_relay "$NEW"
grep -q 'stopped: done 0,.* lost leases 1' "$T_TMP/old.log" || fail "old worker: $(tail -2 "$T_TMP/old.log")"
grep -q 'stopped: done 1,' "$T_TMP/new.log" || fail "new worker: $(tail -2 "$T_TMP/new.log")"
[ "$(grep -c "^end $id " "$T_TMP/runs")" = 2 ] || fail "the job ran $(grep -c "^end $id " "$T_TMP/runs") times, want 2"
[ "$(q "SELECT count(*) FROM pgoutbox.dead_letters")" = 0 ] || fail "dead letters appeared"

# (3) SIGTERM while a job runs: no new claim, the job finishes and is
# recorded, the worker exits 0.
: >"$T_TMP/runs"
id=$(q "SELECT pgoutbox.enqueue('long', '{\"n\": 3}')")
work term
T=$LAST
wait_until 10 "grep -q 'start $id 1 term' $T_TMP/runs 2>/dev/null"
q "SELECT pgoutbox.enqueue('long', '{\"n\": 4}')" >/dev/null
kill -TERM "$T"
wait "$T" || fail "worker exited $? after SIGTERM"
grep -q "end $id 1 term" "$T_TMP/runs" || fail "the running job did not finish before exit"
[ "$(q "SELECT count(*) FROM pgoutbox.long WHERE id = $id")" = 0 ] || fail "the finished job was not recorded"
[ "$(q "SELECT count(*) FROM pgoutbox.long WHERE locked_by IS NULL AND attempts = 0")" = 1 ] || fail "a job was claimed after SIGTERM"
