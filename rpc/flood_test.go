package rpc

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/vecside/vecside/internal/testcert"
)

var floodFor = flag.Duration("rpc.flood", 5*time.Second, "how long the startup flood tests run (their acceptance runs are a minute)")

// floodLimits are startup slots the floods below overfill.
var floodLimits = Limits{MaxStartups: 64, MaxStartupsPerPeer: 16}

// flooder opens connections to addr from local (nil: any) and leaves
// them in one of the states that used to hold a startup slot, opening
// the next as soon as the server closes one, until ctx ends.
type flooder struct {
	addr  string
	local net.Addr
	kind  string // silent, partial, ssl or cancel
}

func (f flooder) run(ctx context.Context) {
	d := net.Dialer{LocalAddr: f.local, Timeout: time.Second}
	for ctx.Err() == nil {
		nc, err := d.DialContext(ctx, "tcp", f.addr)
		if err != nil {
			time.Sleep(10 * time.Millisecond) // out of ports or descriptors for a moment
			continue
		}
		stop := context.AfterFunc(ctx, func() { nc.Close() })
		switch f.kind {
		case "partial":
			nc.Write([]byte{0, 0, 0})
		case "ssl":
			nc.Write(binary.BigEndian.AppendUint32([]byte{0, 0, 0, 8}, sslRequestCode))
		case "cancel":
			msg := binary.BigEndian.AppendUint32([]byte{0, 0, 0, 16}, cancelRequestCode)
			nc.Write(binary.BigEndian.AppendUint64(msg, 0x12345678))
		}
		// Sit until the server closes the connection (or, for a
		// cancel, answers nothing and closes it).
		nc.SetReadDeadline(time.Now().Add(time.Minute))
		buf := make([]byte, 64)
		for {
			if _, err := nc.Read(buf); err != nil {
				break
			}
		}
		stop()
		nc.Close()
	}
}

// flood runs flooders until the test ends.
func flood(t *testing.T, flooders []flooder) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, f := range flooders {
		wg.Go(func() { f.run(ctx) })
	}
}

// loginsDuring logs in to dsn every 100 ms for floodFor, each login
// given a second, and fails the test if any takes longer or fails.
func loginsDuring(t *testing.T, dsn string) {
	t.Helper()
	var took []time.Duration
	for end := time.Now().Add(*floodFor); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		start := time.Now()
		conn, err := pgx.Connect(ctx, dsn)
		if err == nil {
			var one int
			err = conn.QueryRow(ctx, "SELECT 1").Scan(&one)
			conn.Close(context.Background())
		}
		cancel()
		if err != nil {
			t.Fatalf("login %d during the flood: %v", len(took)+1, err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	t.Logf("%d logins during %v of flood: median %v, max %v", len(took), *floodFor, took[len(took)/2], took[len(took)-1])
}

// TestLoginDuringStartupFlood: connections from one address that stay
// silent, send part of a startup packet, stop after an SSLRequest, or
// send bogus CancelRequests, each reopened as soon as it is closed, no
// longer keep logins from another address out: every login succeeds
// within a second. (With a fixed set of slots, the flood held all of
// them and logins got 53300.)
func TestLoginDuringStartupFlood(t *testing.T) {
	ix, _ := newTestIndexer(t)
	// Fewer slots than the defaults, so that 64 flooders overfill them.
	srv, addr := startServerConfig(t, Config{Catalog: ix, Users: testUsers(t), Limits: floodLimits})
	var flooders []flooder
	flooding := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}
	for _, kind := range []string{"silent", "partial", "ssl", "cancel"} {
		for range 16 {
			flooders = append(flooders, flooder{addr: addr, local: flooding, kind: kind})
		}
	}
	flood(t, flooders)
	time.Sleep(200 * time.Millisecond)
	loginsDuring(t, dsnFor(addr, testUser, testPassword, "sslmode=disable"))
	faults := srv.Stats().Faults
	if faults[string(faultStartupEvicted)] == 0 {
		t.Errorf("no startup was evicted during the flood: the test did not fill the slots (faults %v)", faults)
	}
	t.Logf("faults during the flood: %v", faults)
}

// TestAdminLoginDuringWideFlood: the same flood from 200 loopback
// addresses, which no per-address limit holds back: the admin logs in
// through the Unix socket, whose startup slots are its own, every time.
func TestAdminLoginDuringWideFlood(t *testing.T) {
	ix, _ := newTestIndexer(t)
	srv, addr := startServerConfig(t, Config{Catalog: ix, Users: testUsers(t), AdminUser: "bob", Limits: floodLimits})
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, ".s.PGSQL.5432"))
	if err != nil {
		t.Fatal(err)
	}
	alsoServe(t, srv, ln)
	var flooders []flooder
	for i := range 200 {
		local := &net.TCPAddr{IP: net.IPv4(127, 0, 1+byte(i/250), 2+byte(i%250))}
		flooders = append(flooders, flooder{addr: addr, local: local, kind: []string{"silent", "partial", "ssl"}[i%3]})
	}
	flood(t, flooders)
	time.Sleep(200 * time.Millisecond)
	loginsDuring(t, fmt.Sprintf("host=%s port=5432 user=bob password='bob\\'s own' dbname=db sslmode=disable", dir))
	if srv.Stats().Faults[string(faultStartupEvicted)] == 0 {
		t.Errorf("no startup was evicted during the flood: the test did not fill the TCP listener's slots")
	}
}

// TestMaxUserConnections: one user cannot take more sessions than its
// bound; others, and the admin, still can.
func TestMaxUserConnections(t *testing.T) {
	ix, _ := newTestIndexer(t)
	_, addr := startServerConfig(t, Config{Catalog: ix, Users: testUsers(t), AdminUser: "bob",
		Limits: Limits{MaxConnections: 10, MaxUserConnections: 3}})
	var open []*pgx.Conn
	t.Cleanup(func() {
		for _, c := range open {
			c.Close(context.Background())
		}
	})
	connect := func(user, password string) error {
		c, err := pgx.Connect(testContext(t), dsnFor(addr, user, password, "sslmode=disable"))
		if err == nil {
			open = append(open, c)
		}
		return err
	}
	for i := range 3 {
		if err := connect(testUser, testPassword); err != nil {
			t.Fatalf("session %d of %s: %v", i+1, testUser, err)
		}
	}
	err := connect(testUser, testPassword)
	if sqlstate(err) != codeTooManyConnections {
		t.Fatalf("a fourth session of %s: %v, want 53300", testUser, err)
	}
	t.Logf("refused: %v", err)
	for i := range 4 {
		if err := connect("bob", "bob's own"); err != nil {
			t.Fatalf("admin session %d: %v", i+1, err)
		}
	}
	open[0].Close(context.Background())
	open = open[1:]
	if err := connect(testUser, testPassword); err != nil {
		t.Fatalf("a session of %s once one of its three closed: %v", testUser, err)
	}
	if _, err := (Limits{MaxUserConnections: -1}).withDefaults(); err == nil {
		t.Error("a negative MaxUserConnections was accepted")
	}
}

// TestBogusCancelIsClosedAtOnce: a CancelRequest with a wrong key is
// closed before the pause that slows key guessing, on a listener that
// requires TLS too: the pause holds a cancel slot, not the client (each
// bogus cancel used to take 100 ms).
func TestBogusCancelIsClosedAtOnce(t *testing.T) {
	ix, _ := newTestIndexer(t)
	cert := testcert.New(t)
	srv, addr := startSCRAMServer(t, ix, &cert, true)
	srv.cancelPause = 3 * time.Second
	for i := range 3 {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		msg := binary.BigEndian.AppendUint32([]byte{0, 0, 0, 16}, cancelRequestCode)
		nc.Write(binary.BigEndian.AppendUint64(msg, uint64(i)))
		nc.SetReadDeadline(time.Now().Add(time.Second))
		if n, err := nc.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("bogus cancel %d: read %d bytes, %v; want the connection closed at once", i, n, err)
		}
		nc.Close()
	}
}

// TestPoolReconnectsAtOnce: a pool of 64 connections from one address,
// all connected before any has sent its startup message (as after a
// restart, on a busy machine), all log in with the default limits: no
// one of them takes another's slot.
func TestPoolReconnectsAtOnce(t *testing.T) {
	ix, _ := newTestIndexer(t)
	_, addr := startServer(t, ix)
	pool := make([]*rawConn, 64)
	for i := range pool {
		pool[i] = dialRaw(t, addr)
	}
	time.Sleep(100 * time.Millisecond) // every one accepted and waiting
	for i, r := range pool {
		replies := r.startup(pgproto3.ProtocolVersion30, map[string]string{"user": "pooled"})
		if _, ok := replies[len(replies)-1].(*pgproto3.ReadyForQuery); !ok {
			t.Fatalf("pooled connection %d of %d: %s", i+1, len(pool), describeMsgs(replies))
		}
	}
}
