#!/usr/bin/env python3
"""kafka_check.py — checks what kcat read from the mock cluster against the
events the test kept before the relay took them (tests/integration/t_kafka*).

  kafka_check.py EXPECTED.json FORMAT PARTITIONS TOPIC_PREFIX DUMP.jsonl...

EXPECTED.json is a JSON array of the events (id, topic, key, type, payload,
headers, created_at as the relay formats it); DUMP files are kcat -J lines.
FORMAT is plain or cloudevents.  Every event must be there exactly once, on
topic TOPIC_PREFIX + its topic, with its exact key, value and headers, and a
keyed one on the partition the Java client's murmur2 picks.
"""
import json
import sys


def murmur2(data: bytes) -> int:
    """The Java client's Utils.murmur2 (what DefaultPartitioner hashes)."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    i = 0
    while length - i >= 4:
        k = int.from_bytes(data[i:i + 4], 'little')
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
        i += 4
    rest = length - i
    if rest == 3:
        h ^= data[i + 2] << 16
    if rest >= 2:
        h ^= data[i + 1] << 8
    if rest >= 1:
        h ^= data[i]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def java_partition(key: str, partitions: int) -> int:
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions


def main():
    expected, fmt, parts, prefix = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    want = {e['id']: e for e in json.load(open(expected))}
    seen = {}
    for path in sys.argv[5:]:
        for line in open(path):
            m = json.loads(line)
            h = m.get('headers') or []
            hd = dict(zip(h[0::2], h[1::2]))
            eid = int(hd['ce_id'] if fmt == 'cloudevents' else hd['id'])
            if eid in seen:
                sys.exit(f'event {eid} twice')
            seen[eid] = True
            e = want.get(eid)
            if e is None:
                sys.exit(f'event {eid} was never sent')
            if m['topic'] != prefix + e['topic']:
                sys.exit(f'event {eid}: topic {m["topic"]}, want {prefix + e["topic"]}')
            if m['key'] != e['key']:
                sys.exit(f'event {eid}: key {m["key"]!r}, want {e["key"]!r}')
            if json.loads(m['payload']) != e['payload']:
                sys.exit(f'event {eid}: value {m["payload"]!r}, want {e["payload"]!r}')
            if e['key'] is not None and m['partition'] != java_partition(e['key'], parts):
                sys.exit(f'event {eid}: key {e["key"]} on partition {m["partition"]}, '
                         f'murmur2 says {java_partition(e["key"], parts)}')
            if fmt == 'cloudevents':
                exp = {'ce_specversion': '1.0', 'ce_id': str(eid), 'ce_type': e['type'],
                       'ce_source': '/' + e['topic'], 'ce_time': e['created_at'],
                       'content-type': 'application/json'}
                if e['key'] is not None:
                    exp['ce_subject'] = e['key']
            else:
                exp = {'id': str(eid), 'type': e['type'], 'topic': e['topic'],
                       'created_at': e['created_at']}
            for k, v in (e['headers'] or {}).items():
                exp[k] = v if isinstance(v, str) else json.dumps(v, separators=(',', ':'))
            if hd != exp:
                sys.exit(f'event {eid}: headers {hd}, want {exp}')
    missing = set(want) - set(seen)
    if missing:
        sys.exit(f'{len(missing)} events missing, e.g. {sorted(missing)[:5]}')
    print(f'{len(seen)} events, exact')


if __name__ == '__main__':
    main()
