# examples/java (JDBC, Debian's libpostgresql-jdbc-java and
# default-jdk-headless): an order and its event in one transaction, a
# send_batch, and a consumer with the inbox, against PostgreSQL and a
# relay (tests/examples.sh).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../examples.sh"
jar=/usr/share/java/postgresql.jar
command -v javac >/dev/null || fail "javac missing: scripts/deps.sh installs default-jdk-headless"
[ -f "$jar" ] || fail "$jar missing: scripts/deps.sh installs libpostgresql-jdbc-java"
javac -Xlint:all -Werror -d "$T_TMP/classes" -cp "$jar" "$EXAMPLES_DIR"/java/*.java 2>"$T_TMP/javac.log" ||
	fail "javac: $(cat "$T_TMP/javac.log")"
cp="$T_TMP/classes:$jar"
examples_run "java -cp '$cp' Producer" "java -cp '$cp' Consumer"
