# Every ```sql block of README.md, docs/*.md and tests/README.md runs
# without an error against a freshly migrated database (issue 44, item 11:
# snippets that call functions with the wrong arguments fail here).
#
# Each block runs in a database of its own, as one psql script with
# ON_ERROR_STOP.  An HTML comment on the line before a block may give it:
#   <!-- sql: setup: SQL -->   run first, in the same session (tables the
#                              snippet assumes, psql \set variables); the
#                              comment may span lines
#   <!-- sql: skip: WHY -->    not run; the reason is required, and skips
#                              are kept few
# Roles a block creates are dropped after it (roles are per cluster).
. "$(dirname "$0")/../lib.sh"
cd "$(dirname "$0")/../.."
BLOCKS=$T_TMP/blocks
mkdir -p "$BLOCKS"
python3 - "$BLOCKS" README.md docs/*.md tests/README.md >/dev/null <<'PY'
import os, re, sys
out, files = sys.argv[1], sys.argv[2:]
n = 0
for path in files:
    if not os.path.exists(path):
        continue
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```sql":
            i += 1
            continue
        start = i + 1
        j = start
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        if j == len(lines):
            sys.exit(f"{path}:{start}: a ```sql block that never ends")
        body = "\n".join(lines[start:j]) + "\n"
        # The comment that ends on the line before the fence.
        setup = skip = None
        k = i - 1
        if k >= 0 and lines[k].rstrip().endswith("-->"):
            while k > 0 and "<!--" not in lines[k]:
                k -= 1
            comment = " ".join(l.strip() for l in lines[k:i])
            m = re.match(r"<!--\s*sql:\s*(setup|skip):(.*)-->$", comment)
            if m and m.group(1) == "setup":
                setup = "\n".join(lines[k:i])
                setup = setup[setup.index("setup:") + 6:setup.rindex("-->")]
            elif m and m.group(1) == "skip":
                skip = m.group(2).strip()
                if not skip:
                    sys.exit(f"{path}:{start}: <!-- sql: skip --> needs a reason")
        n += 1
        name = os.path.join(out, "%03d" % n)
        with open(name + ".where", "w") as f:
            f.write(f"{path}:{start}\n")
        if skip is not None:
            open(name + ".skip", "w").write(skip + "\n")
        else:
            open(name + ".sql", "w").write((setup or "") + "\n" + body)
        i = j + 1
print(n)
PY
ran=0 skipped=0
for where in "$BLOCKS"/*.where; do
	b=${where%.where}
	at=$(cat "$where")
	if [ -f "$b.skip" ]; then
		skipped=$((skipped + 1))
		note "skipped $at: $(cat "$b.skip")"
		continue
	fi
	t_db t_docs_sql
	before=$(q "SELECT string_agg(rolname, ' ') FROM pg_roles")
	if ! psql -XAq -v ON_ERROR_STOP=1 "$DATABASE_URL" -f "$b.sql" >"$b.out" 2>&1; then
		fail "the SQL block at $at fails:
$(sed 's/^/  | /' "$b.out")
(the block as run, setup first: $b.sql)"
	fi
	for r in $(q "SELECT rolname FROM pg_roles WHERE rolname <> ALL (string_to_array('$before', ' '))"); do
		q "DROP OWNED BY \"$r\"; DROP ROLE \"$r\"" >/dev/null
	done
	ran=$((ran + 1))
done
[ "$ran" -gt 0 ] || fail "no \`\`\`sql block found"
[ "$skipped" -le 3 ] || fail "$skipped blocks skipped: keep skips few"
note "$ran SQL blocks ran, $skipped skipped"
