// consumer — applies events exactly once with pgoutbox's inbox
// (docs/examples.md): each event's id is claimed in the transaction that
// writes its effect, so a redelivered event changes nothing.  The events
// come as NDJSON on stdin, as `pgoutbox relay --sink exec` hands them
// over; from a broker, claim the same id the same way.  Exit 0 acks.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/jackc/pgx/v4"
)

type event struct {
	ID      int64 `json:"id"`
	Payload struct {
		OrderID int64 `json:"order_id"`
	} `json:"payload"`
}

func main() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fail(err)
	}
	defer conn.Close(ctx)

	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64*1024), 2*1024*1024) // an event is at most ~1 MiB
	for in.Scan() {
		if len(in.Bytes()) == 0 {
			continue
		}
		var ev event
		if err := json.Unmarshal(in.Bytes(), &ev); err != nil {
			fail(err)
		}
		var first bool
		err := conn.BeginFunc(ctx, func(tx pgx.Tx) error {
			err := tx.QueryRow(ctx, "SELECT pgoutbox.inbox_claim($1, $2)",
				"shipping", strconv.FormatInt(ev.ID, 10)).Scan(&first)
			if err != nil || !first {
				return err
			}
			_, err = tx.Exec(ctx, "INSERT INTO shipments (order_id) VALUES ($1)", ev.Payload.OrderID)
			return err
		})
		if err != nil {
			fail(err)
		}
		if first {
			fmt.Fprintf(os.Stderr, "event %d: shipped order %d\n", ev.ID, ev.Payload.OrderID)
		} else {
			fmt.Fprintf(os.Stderr, "event %d: a duplicate, skipped\n", ev.ID)
		}
	}
	if err := in.Err(); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "consumer: %v\n", err)
	os.Exit(1)
}
