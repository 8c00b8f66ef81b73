-- The business tables of the language examples (docs/examples.md): the
-- producer writes orders, the consumer writes shipments.  Needs the
-- pgoutbox schema (`pgoutbox migrate`).
CREATE TABLE orders (
    id    bigint PRIMARY KEY,
    total numeric NOT NULL
);
CREATE TABLE shipments (
    order_id   bigint PRIMARY KEY,  -- a second shipment for an order fails
    shipped_at timestamptz NOT NULL DEFAULT now()
);
