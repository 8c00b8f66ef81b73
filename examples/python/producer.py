#!/usr/bin/env python3
"""pgoutbox from Python with psycopg 3 (docs/examples.md): an order and
its event in one transaction, then three orders and their events with one
send_batch call.  DATABASE_URL names the database."""
import os
from decimal import Decimal

import psycopg
from psycopg.types.json import Jsonb

with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
    # The order and its event commit together, or neither does.
    with conn.transaction():
        conn.execute("INSERT INTO orders (id, total) VALUES (%s, %s)", (1, Decimal("9.90")))
        (event_id,) = conn.execute(
            "SELECT pgoutbox.send('orders', %s, 'order.created', %s)",
            ("1", Jsonb({"order_id": 1, "total": "9.90"}))).fetchone()
    print(f"order 1: event {event_id}")

    # Many at once: one call, the events in array order.  The casts pick
    # send_batch(topic text, keys text[], types text[], payloads jsonb[]).
    orders = [{"order_id": 2, "total": "5.00"}, {"order_id": 3, "total": "7.50"},
              {"order_id": 4, "total": "1.25"}]
    with conn.transaction():
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO orders (id, total) VALUES (%s, %s)",
                            [(o["order_id"], Decimal(o["total"])) for o in orders])
        (ids,) = conn.execute(
            "SELECT pgoutbox.send_batch(%s::text, %s::text[], %s::text[], %s::jsonb[])",
            ("orders", [str(o["order_id"]) for o in orders], ["order.created"] * len(orders),
             [Jsonb(o) for o in orders])).fetchone()
    print(f"orders 2-4: events {' '.join(map(str, ids))}")
