#!/usr/bin/env bash
# chat.sh — the chat between two services of issue 3, with faults, counted.
#
# Two services share one PostgreSQL (databases svc_a and svc_b, each with
# schema pgoutbox).  Each writes its chat messages (a.messages, b.messages)
# and the event about each in ONE transaction, every --interval ms, with a
# sequence number per chat; each has its relay publishing to one Redis
# (appendonly yes, appendfsync always) and consumes the other's stream
# with `pgoutbox consume --sql`, recording (chat_id, seq, message_id) in
# its messages_received table through the inbox.  Meanwhile, at times
# drawn from --seed:
#   - each consumer crashes right after recording its 2nd message, before
#     the XACK (--exit-after-commit 2), and is restarted;
#   - B's consumer, later A's, is stopped (SIGTERM) and started again after
#     0.5-2 s (a deploy);
#   - Redis is stopped for about 1.5 s while both keep writing; during the
#     outage each relay is killed with kill -9 and started again.
# Then the writers stop, the rest drains, and the report counts, for each
# direction: saved, received, duplicates skipped, lost (listed), unsent in
# the outbox, applied twice and order violations per chat (a chat's
# received seq must increase in the receiver's commit order).  The exit
# status is non-zero unless every run shows lost: none, nothing unsent or
# applied twice and 0 order violations.
#
# Order (per chat: the event key is the chat id):
#   --mode ordered (the default, as for the relay): the relay's ordered
#     mode keeps a key's events in order by itself; with Redis down a batch
#     goes back untouched and the relay pauses (sink.redis_wait 0: fail at
#     once).
#   --mode concurrent: one relay per service with ONE connection
#     (--in-flight 1), claiming in id order, and a batch waits for Redis
#     (sink.redis_wait, 10 s) instead of failing.  A relay killed while it
#     waits rolls its batch back.
# Each consumer reads its stream alone under a stable consumer name, so
# after a crash it re-reads its own pending entries before new ones.
#
# Consumers (--consumer):
#   c (the default): `pgoutbox consume --sql` on Redis Streams, as above.
#   bullmq: the relays run with --sink bullmq (BullMQ's add script exported
#     from tests/bullmq's bullmq6 with tools/bullmq-export.js, queues
#     chat-{topic}) and each consumer is a real BullMQ Worker (node,
#     tests/bullmq/chat-worker.js, concurrency 1) that per job, in one
#     transaction, calls pgoutbox.inbox_claim and the same record_message,
#     then lets BullMQ complete the job.  The crash: the Worker exits(1)
#     right after its 2nd COMMIT, and BullMQ's stalled-job check (short
#     stalledInterval and lockDuration) hands the job to the restarted
#     Worker, whose inbox claim skips it.  A deploy stops (SIGTERM) and
#     starts the Worker; Redis and the relays fail as above.
#
# usage: tests/chaos/chat.sh [--build DIR] [--seed N] [--runs N]
#        [--duration SECONDS] [--interval MS] [--chats N]
#        [--mode concurrent|ordered] [--redis-wait DUR]
#        [--consumer c|bullmq] [--keep]
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
BUILD=build-asan SEED=$(( $(date +%s) % 100000 )) RUNS=1 DURATION=15
INTERVAL=400 CHATS=3 MODE=ordered REDIS_WAIT= KEEP=0 CONSUMER=c
while [ $# -gt 0 ]; do
	case $1 in
	--build) BUILD=$2; shift ;;
	--seed) SEED=$2; shift ;;
	--runs) RUNS=$2; shift ;;
	--duration) DURATION=$2; shift ;;
	--interval) INTERVAL=$2; shift ;;
	--chats) CHATS=$2; shift ;;
	--redis-wait) REDIS_WAIT=$2; shift ;;
	--mode) MODE=$2; shift ;;
	--consumer) CONSUMER=$2; shift ;;
	--keep) KEEP=1 ;;
	-h|--help) sed -n '2,/^set -uo/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0 ;;
	*) echo "chat.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
case $BUILD in /*) PGO_BIN=$BUILD/pgoutbox ;; *) PGO_BIN=$ROOT/$BUILD/pgoutbox ;; esac
[ -x "$PGO_BIN" ] || { echo "chat.sh: $PGO_BIN not built" >&2; exit 2; }
[ "$DURATION" -ge 8 ] || { echo "chat.sh: --duration must be at least 8 s" >&2; exit 2; }
case $MODE in
concurrent) RELAY_ARGS=(--mode concurrent --in-flight 1 --redis-wait "${REDIS_WAIT:-10s}") ;;
ordered) RELAY_ARGS=(--mode ordered --redis-wait "${REDIS_WAIT:-0}") ;;
*) echo "chat.sh: --mode concurrent or ordered" >&2; exit 2 ;;
esac
NODE_DIR=$ROOT/tests/bullmq
case $CONSUMER in
c) ;;
bullmq)
	command -v node >/dev/null || { echo "chat.sh: node not found (needed for --consumer bullmq)" >&2; exit 2; }
	if [ ! -f "$NODE_DIR/node_modules/bullmq6/package.json" ] ||
		[ ! -f "$NODE_DIR/node_modules/pg/package.json" ]; then
		(cd "$NODE_DIR" && flock "$NODE_DIR/package-lock.json" \
			npm ci --no-audit --no-fund --loglevel=error) >&2 ||
			{ echo "chat.sh: npm ci in tests/bullmq failed" >&2; exit 2; }
	fi ;;
*) echo "chat.sh: --consumer c or bullmq" >&2; exit 2 ;;
esac
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:exitcode=86}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/tests/lsan.supp:print_suppressions=0}
. scripts/pg.sh
. tests/redis.sh

WORK=$(mktemp -d /tmp/pgoutbox-chat.XXXXXX)
chmod 755 "$WORK"
CHILDREN=()
cleanup() {
	touch "$WORK/stop" 2>/dev/null
	for p in "${CHILDREN[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null; done
	for f in "$WORK"/run-*/*.pid; do
		[ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
	done
	redis_stop
	pg_stop
	[ "$KEEP" = 1 ] && echo "chat.sh: kept $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
PG_PORT= pg_start "$WORK/pg" fsync=off || exit 2   # a cluster of its own
REDIS_PORT= redis_start "$WORK/redis" || exit 2
if [ "$CONSUMER" = bullmq ]; then
	node "$ROOT/tools/bullmq-export.js" --from "$NODE_DIR" --package bullmq6 \
		--out "$WORK/bullmq-add.lua" 2>"$WORK/bullmq-export.log" ||
		{ cat "$WORK/bullmq-export.log" >&2; echo "chat.sh: bullmq-export.js failed" >&2; exit 2; }
	# The relays' BullMQ settings; attempts: a job that fails is retried.
	export PGOUTBOX_SINK_BULLMQ_SCRIPT=$WORK/bullmq-add.lua \
		PGOUTBOX_SINK_BULLMQ_QUEUE='chat-{topic}' PGOUTBOX_SINK_BULLMQ_ATTEMPTS=10
fi

ms() { date +%s%3N; }
# The settings a chat wants from a relay: a retry soon after Redis is back.
export PGOUTBOX_RELAY_RETRY_BASE=200ms PGOUTBOX_RELAY_RETRY_MAX=2s \
	PGOUTBOX_RELAY_MAX_ATTEMPTS=1000 PGOUTBOX_RELAY_STATS_INTERVAL=0

# One service's schema: its messages, what it received, and the SQL
# handler its consumer calls inside the inbox transaction.
service_sql() {
	local s=$1 peer=$2
	cat <<EOF
CREATE SCHEMA $s;
CREATE TABLE $s.messages (id bigserial PRIMARY KEY, chat_id int NOT NULL,
    seq int NOT NULL, body text NOT NULL, UNIQUE (chat_id, seq));
CREATE TABLE $s.messages_received (id bigserial PRIMARY KEY, chat_id int,
    seq int, message_id text, sent_at timestamptz,
    received_at timestamptz NOT NULL DEFAULT clock_timestamp());
-- The message and its event in one transaction; seq per chat.
CREATE FUNCTION $s.send_message(chat int) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE m $s.messages;
BEGIN
    INSERT INTO $s.messages (chat_id, seq, body)
    SELECT chat, coalesce(max(seq), 0) + 1, 'hello from $s'
      FROM $s.messages WHERE chat_id = chat
    RETURNING * INTO m;
    PERFORM pgoutbox.send('${s}_to_${peer}', chat::text, 'message.created',
        jsonb_build_object('chat_id', chat, 'seq', m.seq,
                           'message_id', '$s-' || m.id, 'body', m.body,
                           'sent_at', clock_timestamp()));
    RETURN '$s-' || m.id;
END \$\$;
-- Records what the peer sent (no unique constraint: twice would show).
CREATE FUNCTION $s.record_message(p jsonb) RETURNS void LANGUAGE sql AS \$\$
    INSERT INTO $s.messages_received (chat_id, seq, message_id, sent_at)
    VALUES ((p->>'chat_id')::int, (p->>'seq')::int, p->>'message_id',
            (p->>'sent_at')::timestamptz)
\$\$;
EOF
}

# Runs one service's consumer under a supervisor that restarts it when it
# exits: the first start crashes after its 2nd commit (before XACK); a
# deploy writes the downtime into NAME.delay before stopping it.
supervise() {   # name restart_delay command...
	local name=$1 delay=$2 first=1 rc extra; shift 2
	while [ ! -f "$WORK/stop" ]; do
		extra=()
		[ $first = 1 ] && extra=(--exit-after-commit 2)
		first=0
		"$@" "${extra[@]}" >>"$R/$name.log" 2>&1 &
		echo $! >"$R/$name.pid"
		event "$name" "consumer started"
		rc=0
		wait $! || rc=$?
		case $rc in
		0) event "$name" "consumer stopped (SIGTERM)" ;;
		3) event "$name" "consumer crashed right after recording a message, before XACK" ;;
		1) [ "$CONSUMER" = bullmq ] &&
			event "$name" "consumer crashed right after recording a message, before completing the job" ||
			event "$name" "consumer exited with status $rc" ;;
		*) event "$name" "consumer exited with status $rc" ;;
		esac
		[ -f "$WORK/stop" ] && break
		if [ -f "$R/$name.delay" ]; then
			sleep "$(cat "$R/$name.delay")"; rm -f "$R/$name.delay"
		else
			sleep "$delay"
		fi
	done
}

event() {
	local e=$(($(ms) - T0))
	printf '%4d.%ds  %-10s %s\n' $((e / 1000)) $((e % 1000 / 100)) "$1:" "$2" >>"$R/timeline"
}

start_relay() {   # service
	local sink=(--sink redis --redis-stream 'chat:{topic}')
	[ "$CONSUMER" = bullmq ] && sink=(--sink bullmq)
	DATABASE_URL=$(pg_url "svc_$1") "$PGO_BIN" relay "${sink[@]}" --redis "$REDIS_URL" \
		"${RELAY_ARGS[@]}" --poll-interval 1s \
		--name "relay_$1" >/dev/null 2>>"$R/relay_$1.log" &
	echo $! >"$R/relay_$1.pid"
	event "relay $1" "started"
}

writer() {   # service end_ms
	local s=$1 end=$2 i=0 next
	next=$(ms)
	while [ "$(ms)" -lt "$end" ]; do
		psql -XAtq "$(pg_url "svc_$s")" -c "SELECT $s.send_message($((i % CHATS + 1)))" \
			>>"$R/writer_$s.log" 2>&1
		i=$((i + 1))
		next=$((next + INTERVAL))
		local wait_ms=$((next - $(ms)))
		[ $wait_ms -gt 0 ] && sleep "$(printf '%d.%03d' $((wait_ms / 1000)) $((wait_ms % 1000)))"
	done
}

run_once() {
	local seed=$1 d=$((DURATION * 1000)) t now kind
	RANDOM=$seed
	R=$WORK/run-$seed
	mkdir -p "$R"
	rm -f "$WORK/stop"
	rcli FLUSHALL >/dev/null
	for s in a b; do
		psql -XAtq "$(pg_url postgres)" -c "DROP DATABASE IF EXISTS svc_$s" \
			-c "CREATE DATABASE svc_$s" >/dev/null 2>&1
		DATABASE_URL=$(pg_url "svc_$s") "$PGO_BIN" migrate >/dev/null 2>>"$R/setup.log" ||
			{ echo "chat.sh: migrate failed" >&2; return 2; }
	done
	service_sql a b | psql -XAtq -v ON_ERROR_STOP=1 "$(pg_url svc_a)" >/dev/null || return 2
	service_sql b a | psql -XAtq -v ON_ERROR_STOP=1 "$(pg_url svc_b)" >/dev/null || return 2

	# The faults, in ms from the start, drawn from the seed.
	local deploy_b=$((d * 15 / 100 + RANDOM % (d * 20 / 100))) deploy_b_down=$((500 + RANDOM % 1500))
	local redis_at=$((d * 45 / 100 + RANDOM % (d * 15 / 100))) redis_down=$((1200 + RANDOM % 600))
	local kill_a=$((redis_at + 100 + RANDOM % 500)) kill_b=$((redis_at + 100 + RANDOM % 500))
	local back_a=$((100 + RANDOM % 400)) back_b=$((100 + RANDOM % 400))
	local deploy_a=$((d * 70 / 100 + RANDOM % (d * 15 / 100))) deploy_a_down=$((500 + RANDOM % 1500))
	sort -n >"$R/plan" <<EOF
$deploy_b deploy b $deploy_b_down
$redis_at redis_down
$((redis_at + redis_down)) redis_up
$kill_a kill_relay a
$((kill_a + back_a)) start_relay a
$kill_b kill_relay b
$((kill_b + back_b)) start_relay b
$deploy_a deploy a $deploy_a_down
EOF
	T0=$(ms)
	echo "$T0" >"$R/t0"
	: >"$R/timeline"
	for s in a b; do
		local peer=b; [ $s = b ] && peer=a
		if [ "$CONSUMER" = bullmq ]; then
			supervise "consumer_$s" "0.$((RANDOM % 8 + 2))" env PGHOST="$PG_DIR" PGPORT="$PG_PORT" \
				PGUSER=postgres PGDATABASE="svc_$s" node "$NODE_DIR/chat-worker.js" bullmq6 \
				"$REDIS_URL" "chat-${peer}_to_${s}" "svc_$s" "$s.record_message" &
		else
			supervise "consumer_$s" "0.$((RANDOM % 8 + 2))" env DATABASE_URL="$(pg_url "svc_$s")" "$PGO_BIN" consume \
				--redis "$REDIS_URL" --stream "chat:${peer}_to_${s}" --group "svc_$s" \
				--consumer "svc_${s}_1" --sql "$s.record_message" &
		fi
		CHILDREN+=($!)
		start_relay $s
	done
	local writers=()
	for s in a b; do
		writer $s $((T0 + d)) &
		writers+=($!)
	done
	while read -r t kind arg1 arg2; do
		now=$(($(ms) - T0))
		[ $t -gt $now ] && sleep "$(printf '%d.%03d' $(((t - now) / 1000)) $(((t - now) % 1000)))"
		case $kind in
		deploy)
			echo "$(printf '%d.%03d' $((arg2 / 1000)) $((arg2 % 1000)))" >"$R/consumer_$arg1.delay"
			event "deploy" "stopping consumer $arg1 for $arg2 ms"
			kill -TERM "$(cat "$R/consumer_$arg1.pid")" 2>/dev/null ;;
		redis_down) event redis "down"; redis_stop ;;
		redis_up) redis_start_again >/dev/null; event redis "up" ;;
		kill_relay)
			kill -9 "$(cat "$R/relay_$arg1.pid")" 2>/dev/null
			wait "$(cat "$R/relay_$arg1.pid")" 2>/dev/null
			event "relay $arg1" "killed (kill -9) while Redis is down" ;;
		start_relay) start_relay "$arg1" ;;
		esac
	done <"$R/plan"
	wait "${writers[@]}"
	event writers "stopped"
	# Drain: every saved message received on the other side.
	wait_for 'drain' 'drained' 60 || event drain "gave up after 60 s"
	event drain "done"
	touch "$WORK/stop"
	for s in a b; do
		kill -TERM "$(cat "$R/consumer_$s.pid")" "$(cat "$R/relay_$s.pid")" 2>/dev/null
	done
	for p in "${CHILDREN[@]}" "$(cat "$R/relay_a.pid")" "$(cat "$R/relay_b.pid")"; do
		wait "$p" 2>/dev/null
	done
	CHILDREN=()
	rm -f "$R"/*.pid
	report "$seed"
}

wait_for() {   # what condition seconds
	local end=$(($(ms) + $3 * 1000))
	until eval "$2"; do
		[ "$(ms)" -lt $end ] || return 1
		sleep 0.2
	done
}

count() { psql -XAtq "$(pg_url "$1")" -c "$2"; }
drained() {
	[ "$(count svc_a 'SELECT count(*) FROM a.messages')" = "$(count svc_b 'SELECT count(DISTINCT message_id) FROM b.messages_received')" ] &&
	[ "$(count svc_b 'SELECT count(*) FROM b.messages')" = "$(count svc_a 'SELECT count(DISTINCT message_id) FROM a.messages_received')" ] &&
	[ "$(count svc_a 'SELECT count(*) FROM pgoutbox.outbox')" = 0 ] &&
	[ "$(count svc_b 'SELECT count(*) FROM pgoutbox.outbox')" = 0 ]
}

report() {
	local seed=$1
	for s in a b; do
		local peer=b; [ $s = b ] && peer=a
		count "svc_$s" "SELECT '$s-' || id, chat_id, seq FROM $s.messages ORDER BY id" >"$R/saved_$s"
		count "svc_$peer" "SELECT message_id, chat_id, seq,
			round(extract(epoch FROM received_at - sent_at) * 1000, 1)
			FROM $peer.messages_received ORDER BY id" >"$R/received_$peer"
		count "svc_$s" "SELECT (SELECT count(*) FROM pgoutbox.outbox) + (SELECT count(*) FROM pgoutbox.dead_letters)" >"$R/unsent_$s"
	done
	python3 - "$R" "$seed" "$DURATION" "$INTERVAL" "${RELAY_ARGS[*]}" "$CONSUMER" <<'EOF'
import datetime, re, sys
R, seed, duration, interval, mode, consumer = sys.argv[1:7]

def rows(path):
    with open(path) as f:
        return [l.rstrip('\n').split('|') for l in f if l.strip()]

def pct(xs, p):
    if not xs:
        return float('nan')
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]

# The inbox at work: redeliveries dropped, from the consumers' logs.
t0 = int(open(f'{R}/t0').read())
timeline = [l.rstrip() for l in open(f'{R}/timeline')]
for name in ('a', 'b'):
    for l in open(f'{R}/consumer_{name}.log'):
        m = re.match(r'(\d+-\d+-\d+T\d+:\d+:\d+\.\d+)Z INFO .*: event (\S+) \((?:entry|job) \S+\) again', l)
        if m:
            when = datetime.datetime.strptime(m.group(1), '%Y-%m-%dT%H:%M:%S.%f')
            e = (when.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000 - t0) / 1000
            timeline.append(f'{e:6.1f}s  {"consumer_" + name + ":":10} event {m.group(2)} again: '
                            'already in the inbox, skipped')
timeline.sort(key=lambda l: float(l.split('s', 1)[0]))
ok = True
sinks = {'c': 'Redis Streams, consumers: pgoutbox consume',
         'bullmq': 'BullMQ (bullmq6), consumers: BullMQ Workers (node)'}
print(f'run seed {seed}: {duration} s, a message every {interval} ms per service; relays: {mode}; '
      f'{sinks[consumer]}')
for line in timeline:
    print('  ' + line)
for s, peer in (('a', 'b'), ('b', 'a')):
    saved = rows(f'{R}/saved_{s}')
    received = rows(f'{R}/received_{peer}')
    unsent = int(open(f'{R}/unsent_{s}').read().strip() or 0)
    got = {}
    for mid, chat, seq, lat in received:
        got[mid] = got.get(mid, 0) + 1
    lost = [f'{m} (chat {c} seq {q})' for m, c, q in saved if m not in got]
    twice = sum(1 for n in got.values() if n > 1)
    last, violations = {}, {}
    for mid, chat, seq, lat in received:
        if int(seq) <= last.get(chat, 0):
            violations[chat] = violations.get(chat, 0) + 1
        last[chat] = max(last.get(chat, 0), int(seq))
    # Each consumer process prints its counts when it exits.
    dups = sum(int(m.group(1)) for m in re.finditer(
        r'^(?:pgoutbox consume|bullmq worker): .*duplicates skipped (\d+)',
        open(f'{R}/consumer_{peer}.log').read(), re.M))
    lats = [float(r[3]) for r in received]
    chats = sorted({c for _, c, _ in saved}, key=int)
    per_chat = ', '.join(f'chat {c}: {violations.get(c, 0)}' for c in chats)
    print(f'{s.upper()} -> {peer.upper()}')
    print(f'  saved by {s.upper()}:{"":11}{len(saved)}')
    print(f'  received by {peer.upper()}:{"":8}{len(got)}')
    print(f'  duplicates skipped:  {dups}')
    print(f'  lost:                {", ".join(lost) if lost else "none"}')
    print(f'  unsent in outbox:    {unsent}')
    print(f'  applied twice:       {twice}')
    print(f'  order violations:    {sum(violations.values())} ({per_chat})')
    if lats:
        print(f'  latency send->recorded: p50 {pct(lats, 50):.1f} ms, p95 {pct(lats, 95):.1f} ms, '
              f'p99 {pct(lats, 99):.1f} ms, max {max(lats):.1f} ms')
    ok = ok and not lost and unsent == 0 and twice == 0 and not violations
print(f'run seed {seed}: {"PASS" if ok else "FAIL"}')
sys.exit(0 if ok else 1)
EOF
}

passed=0 failed=0 failing=()
for ((k = 0; k < RUNS; k++)); do
	seed=$((SEED + k))
	if run_once "$seed"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1)); failing+=("$seed")
		for f in "$R"/relay_*.log "$R"/consumer_*.log; do
			grep -h -E 'ERROR|WARN' "$f" | tail -n 5 | sed "s|^|  $(basename "$f"): |"
		done
	fi
	echo
done
echo "chat: $RUNS run(s) from seed $SEED: $passed passed, $failed failed${failing[*]:+ (seeds ${failing[*]})}"
[ "$failed" = 0 ]
