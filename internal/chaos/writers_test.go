package chaos

import (
	"context"
	"fmt"
	"time"
)

// writerResult is what a writer did: transactions that returned
// success, transient failures retried, and the error that stopped it.
type writerResult struct {
	txns, retries int
	err           error
}

// writeItems runs items transactions until stop is closed. A transaction
// cut off by a fault is run again on a new connection: each one is valid
// whether or not an earlier attempt committed.
func writeItems(ctx context.Context, dsn string, g *itemsGen, stop <-chan struct{}) (res writerResult) {
	db := &pgClient{dsn: dsn}
	defer db.close()
	for {
		select {
		case <-stop:
			return res
		case <-time.After(time.Duration(g.rng.IntN(20)) * time.Millisecond): // pacing
		}
		kind, sql := g.txn()
		retries, err := db.exec(ctx, sql)
		res.retries += retries
		if err != nil {
			res.err = fmt.Errorf("%s: %w\n%.300s", kind, err, sql)
			return res
		}
		res.txns++
	}
}

// writeBulk runs bulk transactions until stop is closed, and the large
// one once bigAt has come; it does not stop before that one committed.
func writeBulk(ctx context.Context, dsn string, g *bulkGen, bigRows int, bigAt time.Time, stop <-chan struct{}) (res writerResult) {
	db := &pgClient{dsn: dsn}
	defer db.close()
	bigDone := false
	for {
		pause := time.Duration(200+g.rng.IntN(600)) * time.Millisecond
		if !bigDone {
			pause = min(pause, max(0, time.Until(bigAt)))
		}
		select {
		case <-stop:
			if bigDone {
				return res
			}
		case <-time.After(pause): // pacing
		}
		kind, sql := g.txn()
		if !bigDone && !time.Now().Before(bigAt) {
			kind, sql, bigDone = "big", g.big(bigRows), true
		}
		retries, err := db.exec(ctx, sql)
		res.retries += retries
		if err != nil {
			res.err = fmt.Errorf("%s: %w\n%.300s", kind, err, sql)
			return res
		}
		res.txns++
	}
}
