//go:build cgo

package proxy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// describeFirst is a client that prepares a statement, describes it and
// flushes, then binds and executes it once the description has come
// ([Parse, Describe, Flush], then [Bind, Execute, Sync]), as postgres.js
// and Drizzle on it send every statement; named, a second execution
// binds it again.
type describeFirst struct {
	t   *testing.T
	h   *pgconn.HijackedConn
	log []string // each reply: its type, and a DataRow's values
}

func (d *describeFirst) send(msgs ...pgproto3.FrontendMessage) {
	for _, m := range msgs {
		d.h.Frontend.Send(m)
	}
	if err := d.h.Frontend.Flush(); err != nil {
		d.t.Fatal(err)
	}
}

// until reads replies up to one for which done says so.
func (d *describeFirst) until(done func(pgproto3.BackendMessage) bool) {
	d.h.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		m, err := d.h.Frontend.Receive()
		if err != nil {
			d.t.Fatalf("after %v: %v", d.log, err)
		}
		entry := fmt.Sprintf("%T", m)
		if r, ok := m.(*pgproto3.DataRow); ok {
			entry = fmt.Sprintf("row %s", r.Values[0])
		}
		d.log = append(d.log, strings.TrimPrefix(entry, "*pgproto3."))
		if done(m) {
			return
		}
	}
}

func described(m pgproto3.BackendMessage) bool {
	switch m.(type) {
	case *pgproto3.RowDescription, *pgproto3.NoData, *pgproto3.ErrorResponse:
		return true
	}
	return false
}

func ready(m pgproto3.BackendMessage) bool { _, ok := m.(*pgproto3.ReadyForQuery); return ok }

// TestDescribeBeforeBind: statements sent as postgres.js sends them are
// answered through the sidecar, unnamed, named and executed again, with
// the replies PostgreSQL gives in the order it gives them; a Parse that
// fails gets PostgreSQL's error and the Bind after it PostgreSQL's
// silence until the Sync.
func TestDescribeBeforeBind(t *testing.T) {
	f := newFixture(t, 300)
	sql := "SELECT id FROM items ORDER BY embedding <-> $1 LIMIT 5"
	vec := []byte(f.vector())
	session := func(url string) []string {
		d := &describeFirst{t: t, h: hijack(t, url)}
		for _, c := range []struct{ name, sql string }{{"", sql}, {"s1", sql}, {"", "SELECT id FROM items ORDER BY nosuch <-> $1 LIMIT 5"}} {
			d.send(&pgproto3.Parse{Name: c.name, Query: c.sql}, &pgproto3.Describe{ObjectType: 'S', Name: c.name}, &pgproto3.Flush{})
			d.until(described)
			d.send(&pgproto3.Bind{PreparedStatement: c.name, Parameters: [][]byte{vec}}, &pgproto3.Execute{}, &pgproto3.Sync{})
			d.until(ready)
		}
		d.send(&pgproto3.Bind{PreparedStatement: "s1", Parameters: [][]byte{vec}}, &pgproto3.Execute{}, &pgproto3.Sync{})
		d.until(ready)
		return d.log
	}
	want := session(f.dsn)
	before := f.p.Stats().Accelerated
	got := session(f.via)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("through the proxy:\n%v\nPostgreSQL:\n%v", got, want)
	}
	if n := f.p.Stats().Accelerated - before; n != 3 {
		t.Errorf("%d of the 3 statements that ran accelerated", n)
	}
}

// TestPassedThroughReplies: a statement the loop handed over, passed
// through after all (its table is not indexed), gets its replies at
// once, not after the goroutine's wait for the client's next message,
// which waits for them (the wait made a minute here).
func TestPassedThroughReplies(t *testing.T) {
	f := newFixture(t, 100)
	mustExec(t, f.db, "CREATE TABLE other (id int PRIMARY KEY, embedding real[]); INSERT INTO other SELECT g, ARRAY[g, 0] FROM generate_series(1, 100) g")
	f.p.stickiness = time.Minute
	c := connect(t, f.via)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec, pgx.QueryExecModeCacheStatement} {
		for range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var ids []int32
			rows, err := c.Query(ctx, "SELECT id FROM other ORDER BY embedding <-> $1 LIMIT 3", mode, []float32{3.2, 0})
			if err == nil {
				ids, err = pgx.CollectRows(rows, pgx.RowTo[int32])
			}
			cancel()
			if err != nil || fmt.Sprint(ids) != "[3 4 2]" {
				t.Fatalf("%v: %v, %v; want [3 4 2] within 5 s", mode, ids, err)
			}
		}
	}
	if f.p.Stats().Looped == 0 {
		t.Error("no session relayed by the loop")
	}
}
