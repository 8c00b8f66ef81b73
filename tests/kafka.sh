# kafka.sh — sourced helpers that run librdkafka's mock cluster
# (tests/kafka_mock.c, three brokers on 127.0.0.1) for a test, like
# redis.sh does for redis-server, and read what it holds with kcat.
#
#   kafka_start DIR [BROKERS]   sets KAFKA_BROKERS (the bootstrap servers)
#   kafka_cmd CMD...            a command of kafka_mock (down 1, up 1,
#                               errors produce NOT_LEADER_FOR_PARTITION, ...);
#                               fails unless it answers ok
#   kafka_stop                  ends the cluster
#   kcat_dump TOPIC             every message of TOPIC as JSON lines (kcat -J:
#                               partition, offset, key, payload, headers)
#   kcat_count TOPIC            how many messages TOPIC holds

KAFKA_MOCK=$(dirname "$PGO_BIN")/tests/kafka_mock

kafka_start() {
	local dir=$1
	[ -x "$KAFKA_MOCK" ] || { echo "kafka.sh: $KAFKA_MOCK not built" >&2; return 1; }
	command -v kcat >/dev/null || { echo "kafka.sh: kcat not found (apt-get install kcat)" >&2; return 1; }
	KAFKA_DIR=$(mkdir -p "$dir" && cd "$dir" && pwd)
	rm -f "$KAFKA_DIR/ctl"
	mkfifo "$KAFKA_DIR/ctl"
	ASAN_OPTIONS=detect_leaks=0 "$KAFKA_MOCK" "${2:-3}" <"$KAFKA_DIR/ctl" >"$KAFKA_DIR/out" 2>"$KAFKA_DIR/log" &
	KAFKA_PID=$!
	exec {KAFKA_CTL}>"$KAFKA_DIR/ctl"
	local i
	for i in $(seq 200); do
		KAFKA_BROKERS=$(head -n 1 "$KAFKA_DIR/out" 2>/dev/null || true)
		[ -n "$KAFKA_BROKERS" ] && break
		sleep 0.05
	done
	[ -n "$KAFKA_BROKERS" ] || { echo "kafka.sh: the mock cluster did not start" >&2; cat "$KAFKA_DIR/log" >&2; return 1; }
	KAFKA_ANSWERS=1
	export KAFKA_BROKERS
}

kafka_cmd() {
	echo "$*" >&"$KAFKA_CTL"
	KAFKA_ANSWERS=$((KAFKA_ANSWERS + 1))
	local i answer=
	for i in $(seq 200); do
		answer=$(sed -n "${KAFKA_ANSWERS}p" "$KAFKA_DIR/out")
		[ -n "$answer" ] && break
		sleep 0.02
	done
	[ "$answer" = ok ] || { echo "kafka.sh: $*: ${answer:-no answer}" >&2; return 1; }
}

kafka_stop() {
	[ -n "${KAFKA_PID:-}" ] || return 0
	exec {KAFKA_CTL}>&-
	kill -TERM "$KAFKA_PID" 2>/dev/null || true
	wait "$KAFKA_PID" 2>/dev/null || true
	KAFKA_PID=
}

kcat_dump() {
	kcat -C -b "$KAFKA_BROKERS" -t "$1" -e -q -J 2>/dev/null
}

kcat_count() {
	kcat_dump "$1" | wc -l
}
