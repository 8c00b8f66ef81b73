# redis.sh — sourced helpers that run a throwaway redis-server in a
# directory, like scripts/pg.sh does for PostgreSQL: a free port on
# 127.0.0.1, durable AOF (appendonly yes, appendfsync always, no RDB
# snapshots), logs in the directory.
#
#   redis_start DIR [extra redis-server args...]  sets REDIS_DIR, REDIS_PORT,
#                                                 REDIS_URL (redis://127.0.0.1:PORT/0)
#   redis_stop            SHUTDOWN-like stop (SIGTERM), waits for the exit
#   redis_start_again     same port, directory, AOF and arguments
#   redis_kill9           crash it
#   rcli ARGS...          redis-cli against it (raw output)

redis_free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

redis_start() {
	local dir=$1; shift
	command -v redis-server >/dev/null || { echo "redis.sh: redis-server not found (apt-get install redis-server)" >&2; return 1; }
	REDIS_DIR=$(mkdir -p "$dir" && cd "$dir" && pwd)
	REDIS_PORT=${REDIS_PORT:-$(redis_free_port)}
	REDIS_ARGS=("$@")
	REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
	export REDIS_DIR REDIS_PORT REDIS_URL
	redis_start_again
}

redis_start_again() {
	redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$REDIS_DIR" \
		--appendonly yes --appendfsync always --save '' \
		--logfile "$REDIS_DIR/redis.log" --pidfile "$REDIS_DIR/redis.pid" \
		--daemonize no --protected-mode no "${REDIS_ARGS[@]}" \
		>/dev/null 2>&1 &
	REDIS_PID=$!
	export REDIS_PID
	local i
	for i in $(seq 200); do
		# PING answers (even NOAUTH) once the server accepts connections.
		if redis-cli -h 127.0.0.1 -p "$REDIS_PORT" PING 2>/dev/null | grep -e PONG -e NOAUTH -e LOADING >/dev/null; then
			return 0
		fi
		kill -0 "$REDIS_PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "redis.sh: redis-server did not start" >&2
	tail -n 20 "$REDIS_DIR/redis.log" >&2 2>/dev/null
	return 1
}

redis_stop() {
	[ -n "${REDIS_PID:-}" ] || return 0
	kill -TERM "$REDIS_PID" 2>/dev/null || true
	wait "$REDIS_PID" 2>/dev/null || true
	REDIS_PID=
}

redis_kill9() {
	[ -n "${REDIS_PID:-}" ] || return 0
	kill -9 "$REDIS_PID" 2>/dev/null || true
	wait "$REDIS_PID" 2>/dev/null || true
	REDIS_PID=
}

rcli() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" --no-auth-warning "$@"; }
