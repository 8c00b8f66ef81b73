# examples/python (psycopg 3, Debian's python3-psycopg): an order and its
# event in one transaction, a send_batch, and a consumer with the inbox,
# against PostgreSQL and a relay (tests/examples.sh).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../examples.sh"
# Debian's python3, which has python3-psycopg (another python3 may come
# first on PATH).
py=/usr/bin/python3
"$py" -c 'import psycopg' 2>/dev/null || fail "psycopg 3 missing: scripts/deps.sh installs python3-psycopg"
dir=$EXAMPLES_DIR/python
examples_run "$py '$dir/producer.py'" "$py '$dir/consumer.py'"
