# The chat scenario of issue 3, short: one seeded run of about 15 s of two
# services chatting through Redis with a consumer crash before XACK,
# deploys, a Redis outage and relays killed during it.  It must report
# lost: none and no order violation.  `make chaos` runs 20 seeds;
# CHAT_SEED=n reproduces a run.
# serial: timing-sensitive, run alone (tests/run.sh)
. "$(dirname "$0")/../lib.sh"
seed=${CHAT_SEED:-$RANDOM}
"$(dirname "$0")/../chaos/chat.sh" --build "$(dirname "$PGO_BIN")" --seed "$seed" --duration 15 \
	>"$T_TMP/chat.txt" 2>&1 || { cat "$T_TMP/chat.txt"; fail "chat seed $seed"; }
grep -E '^(A|B) -> |lost:|order violations:|duplicates skipped:|latency' "$T_TMP/chat.txt" | sed 's/^/  /' >&2
