# examples/go (pgx v4 from Debian's golang-github-jackc-pgx-v4-dev, built
# in GOPATH mode against /usr/share/gocode): an order and its event in one
# transaction, a send_batch, and a consumer with the inbox, against
# PostgreSQL and a relay (tests/examples.sh).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../examples.sh"
command -v go >/dev/null || fail "go missing: scripts/deps.sh installs golang-go"
[ -d /usr/share/gocode/src/github.com/jackc/pgx/v4 ] || fail "pgx v4 missing: scripts/deps.sh installs golang-github-jackc-pgx-v4-dev"
export GO111MODULE=off GOPATH=$T_TMP/gopath:/usr/share/gocode GOCACHE=$T_TMP/gocache GOFLAGS=
for p in producer consumer; do
	(cd "$EXAMPLES_DIR/go/$p" && go vet . && go build -o "$T_TMP/$p" .) >"$T_TMP/go.log" 2>&1 ||
		fail "go build $p: $(cat "$T_TMP/go.log")"
done
examples_run "'$T_TMP/producer'" "'$T_TMP/consumer'"
