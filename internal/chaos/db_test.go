package chaos

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pgClient is a connection that survives Postgres restarts: statements
// that fail because the server went away are retried on a new connection.
type pgClient struct {
	dsn  string
	conn *pgx.Conn
}

// transient reports whether err comes from the server going away
// (shutdown, crash, restart, a lost connection) rather than from the
// statement itself.
func transient(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		class := pgErr.Code[:2]
		return class == "57" || class == "08" || pgErr.Code == "53300"
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// do runs fn on a live connection, reconnecting and running it again
// after transient failures, until it succeeds, fails for another reason,
// or ctx ends. retries counts the transient failures.
func (c *pgClient) do(ctx context.Context, fn func(*pgx.Conn) error) (retries int, err error) {
	for {
		if c.conn == nil {
			c.conn, err = pgx.Connect(ctx, c.dsn)
		}
		if err == nil {
			if err = fn(c.conn); err == nil {
				return retries, nil
			}
		}
		if c.conn != nil {
			c.conn.Close(context.Background())
			c.conn = nil
		}
		if ctx.Err() != nil || !transient(err) {
			return retries, err
		}
		retries++
		select {
		case <-ctx.Done():
			return retries, err
		case <-time.After(100 * time.Millisecond): // Postgres is restarting
		}
	}
}

// exec runs sql (one or more statements, simple protocol) with retries.
func (c *pgClient) exec(ctx context.Context, sql string) (int, error) {
	return c.do(ctx, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, sql)
		return err
	})
}

func (c *pgClient) close() {
	if c.conn != nil {
		c.conn.Close(context.Background())
		c.conn = nil
	}
}
