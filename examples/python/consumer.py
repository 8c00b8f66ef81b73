#!/usr/bin/env python3
"""Applies events exactly once with pgoutbox's inbox (docs/examples.md):
each event's id is claimed in the transaction that writes its effect, so
a redelivered event changes nothing.  The events come as NDJSON on stdin,
as `pgoutbox relay --sink exec` hands them over; from a broker, claim the
same id the same way.  Exit 0 acks."""
import json
import os
import sys

import psycopg

with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
    for line in sys.stdin:
        if not line.strip():
            continue
        event = json.loads(line)
        with conn.transaction():
            (first,) = conn.execute("SELECT pgoutbox.inbox_claim(%s, %s)",
                                    ("shipping", str(event["id"]))).fetchone()
            if first:
                conn.execute("INSERT INTO shipments (order_id) VALUES (%s)",
                             (event["payload"]["order_id"],))
        print(f"event {event['id']}: " + ("shipped" if first else "a duplicate, skipped"),
              file=sys.stderr)
