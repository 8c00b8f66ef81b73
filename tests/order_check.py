#!/usr/bin/env python3
"""order_check.py NDJSON_FILE DB_URL_FOR_PSQL

Checks per-key order of an ordered relay's output: the file holds NDJSON
lines in arrival order (all relays append to it); each payload carries the
key's version {"v": n}, versions 1, 2, 3 ... as the producers committed them.
Per key, the FIRST delivery of each version must come in increasing order
with no gap (a later version first-delivered before an earlier one is a
violation); duplicates of already delivered versions are allowed.  At the
end every version up to the aggregate's final one must have arrived.
Prints a summary; exits 1 on any violation or loss.
"""
import json
import subprocess
import sys


def main():
    path, url = sys.argv[1], sys.argv[2]
    expected = {}        # key -> next version whose first delivery is due
    violations = []
    deliveries = duplicates = 0
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except json.JSONDecodeError as e:
                print(f'line {n}: not JSON ({e}): {line[:120]}')
                sys.exit(1)
            key, v = ev['key'], ev['payload']['v']
            deliveries += 1
            nxt = expected.get(key, 1)
            if v < nxt:
                duplicates += 1
            elif v == nxt:
                expected[key] = nxt + 1
            else:
                violations.append(f'line {n}: key {key} version {v} arrived first before version {nxt}')
                expected[key] = v + 1
    out = subprocess.run(['psql', '-XAtq', url, '-c', 'SELECT key, version FROM agg'],
                         check=True, capture_output=True, text=True).stdout
    lost = []
    for row in out.split():
        key, final = row.split('|')
        got = expected.get(key, 1) - 1
        if got < int(final):
            lost.append(f'{key}: versions {got + 1}..{final}')
    print(f'deliveries {deliveries}, duplicates {duplicates}, keys {len(expected)}, '
          f'order violations {len(violations)}, keys with losses {len(lost)}')
    for v in violations[:10]:
        print('  ' + v)
    for l in lost[:10]:
        print('  lost ' + l)
    sys.exit(1 if violations or lost else 0)


if __name__ == '__main__':
    main()
