// producer — pgoutbox from Go with pgx v4 (docs/examples.md): an order
// and its event in one transaction, then three orders and their events
// with one send_batch call.  DATABASE_URL names the database.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v4"
)

func main() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fail(err)
	}
	defer conn.Close(ctx)

	// The order and its event commit together, or neither does
	// (BeginFunc commits when the function returns nil).
	var id int64
	err = conn.BeginFunc(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO orders (id, total) VALUES ($1, $2)", 1, "9.90"); err != nil {
			return err
		}
		return tx.QueryRow(ctx, "SELECT pgoutbox.send('orders', $1, 'order.created', $2)",
			"1", `{"order_id": 1, "total": "9.90"}`).Scan(&id)
	})
	if err != nil {
		fail(err)
	}
	fmt.Printf("order 1: event %d\n", id)

	// Many at once: one call, the events in array order.  The casts pick
	// send_batch(topic text, keys text[], types text[], payloads jsonb[]).
	orders := []struct{ id, total string }{{"2", "5.00"}, {"3", "7.50"}, {"4", "1.25"}}
	var keys, types, payloads []string
	var ids []int64
	err = conn.BeginFunc(ctx, func(tx pgx.Tx) error {
		for _, o := range orders {
			if _, err := tx.Exec(ctx, "INSERT INTO orders (id, total) VALUES ($1::bigint, $2)", o.id, o.total); err != nil {
				return err
			}
			keys = append(keys, o.id)
			types = append(types, "order.created")
			payloads = append(payloads, fmt.Sprintf(`{"order_id": %s, "total": %q}`, o.id, o.total))
		}
		return tx.QueryRow(ctx, "SELECT pgoutbox.send_batch($1::text, $2::text[], $3::text[], $4::jsonb[])",
			"orders", keys, types, payloads).Scan(&ids)
	})
	if err != nil {
		fail(err)
	}
	fmt.Printf("orders 2-4: events %v\n", ids)
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "producer: %v\n", err)
	os.Exit(1)
}
