# control-lib.sh — sourced by the control runs (bench/consume-control.sh,
# bench/steady-control.sh), from the repository's root.
#
#   control_build NAME BUILD   sets PGO and BENCH (BUILD relative to the
#                              root or absolute); exits 2, saying which,
#                              when one is not built
#   control_pg NAME            makes TMP, starts a throwaway PostgreSQL in
#                              it with make bench's settings (durable
#                              commits; only the cache and WAL sizes
#                              raised) and stops it and removes TMP on exit

control_build() {
	local name=$1 build=$2 exe
	case $build in /*) ;; *) build=$PWD/$build ;; esac
	PGO=$build/pgoutbox
	BENCH=$build/bench/pgoutbox-bench
	for exe in "$PGO" "$BENCH"; do
		[ -x "$exe" ] || {
			echo "$name: $exe not built (ninja -C $build)" >&2
			exit 2
		}
	done
}

control_pg() {
	TMP=$(mktemp -d "/tmp/pgoutbox-$1.XXXXXX")
	chmod 755 "$TMP"
	. scripts/pg.sh
	trap 'pg_stop; rm -rf "$TMP"' EXIT
	trap 'exit 130' INT TERM
	pg_start "$TMP/pg" shared_buffers=256MB fsync=on synchronous_commit=on \
		max_wal_size=4GB checkpoint_timeout=30min >/dev/null
}
