# nats.sh — sourced helpers that run a throwaway nats-server with
# JetStream (file storage in the directory) on a free port on 127.0.0.1,
# like tests/redis.sh does for Redis, and talk to it with tests/nats_js.py.
#
#   nats_start DIR [extra nats-server args...]  sets NATS_DIR, NATS_PORT,
#                                               NATS_URL (nats://127.0.0.1:PORT)
#   nats_stop            SIGTERM, waits for the exit
#   nats_start_again     same port, store directory and arguments
#   nats_kill9           crash it
#   js ARGS...           tests/nats_js.py against it (create, info, dump, delete)

nats_free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

nats_start() {
	local dir=$1; shift
	command -v nats-server >/dev/null || { echo "nats.sh: nats-server not found (apt-get install nats-server)" >&2; return 1; }
	NATS_DIR=$(mkdir -p "$dir" && cd "$dir" && pwd)
	NATS_PORT=${NATS_PORT:-$(nats_free_port)}
	NATS_ARGS=("$@")
	NATS_URL="nats://127.0.0.1:$NATS_PORT"
	export NATS_DIR NATS_PORT NATS_URL
	nats_start_again
}

nats_start_again() {
	NATS_STARTS=$(( ${NATS_STARTS:-0} + 1 ))
	nats-server -js -sd "$NATS_DIR/store" -p "$NATS_PORT" -a 127.0.0.1 \
		-l "$NATS_DIR/nats.$NATS_STARTS.log" "${NATS_ARGS[@]}" >/dev/null 2>&1 &
	NATS_PID=$!
	export NATS_PID NATS_STARTS
	local i
	for i in $(seq 200); do
		# Ready once JetStream answers its API (auth may refuse: that
		# is an answer too).
		if js ready 2>/dev/null; then
			return 0
		fi
		kill -0 "$NATS_PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "nats.sh: nats-server did not start" >&2
	tail -n 20 "$NATS_DIR/nats.$NATS_STARTS.log" >&2 2>/dev/null
	return 1
}

nats_stop() {
	[ -n "${NATS_PID:-}" ] || return 0
	kill -TERM "$NATS_PID" 2>/dev/null || true
	wait "$NATS_PID" 2>/dev/null || true
	NATS_PID=
}

nats_kill9() {
	[ -n "${NATS_PID:-}" ] || return 0
	kill -9 "$NATS_PID" 2>/dev/null || true
	wait "$NATS_PID" 2>/dev/null || true
	NATS_PID=
}

js() { python3 "$(dirname "${BASH_SOURCE[0]}")/nats_js.py" "$NATS_PORT" "$@"; }
