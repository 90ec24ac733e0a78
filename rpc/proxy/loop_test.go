//go:build cgo && linux

package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// socketPair is two connected Unix sockets as net.Conns.
func socketPair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var conns [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		conns[i], err = net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conns[i].Close() })
	}
	return conns[0], conns[1]
}

// randomMessages is a stream of well-framed messages of the given types,
// a few larger than held, so that they pass in pieces.
func randomMessages(rng *rand.Rand, types string, count, held int) []byte {
	var out []byte
	for range count {
		typ := types[rng.IntN(len(types))]
		var body []byte
		switch typ {
		case 'Z':
			body = []byte{"ITE"[rng.IntN(3)]}
		case 'S':
			body = []byte("application_name\x00app\x00")
		case 'Q', 'P':
			body = append([]byte("SELECT 'no distance here' /* "), bytes.Repeat([]byte{'x'}, rng.IntN(2*held))...)
			body = append(body, " */\x00"...)
			if typ == 'P' {
				body = append([]byte("s\x00"), append(body, 0, 0)...)
			}
		default:
			n := rng.IntN(held / 2)
			if rng.IntN(8) == 0 {
				n = held + rng.IntN(4*held)
			}
			body = make([]byte, n)
			for i := range body {
				body[i] = byte(rng.Uint32())
			}
		}
		out = append(out, typ)
		out = binary.BigEndian.AppendUint32(out, uint32(len(body)+4))
		out = append(out, body...)
	}
	return out
}

// writeChunked writes b in pieces of random sizes, pausing now and then,
// so that messages and their headers arrive split anywhere.
func writeChunked(t *testing.T, c net.Conn, b []byte, rng *rand.Rand) {
	for len(b) > 0 {
		n := min(len(b), 1+rng.IntN(3000))
		if _, err := c.Write(b[:n]); err != nil {
			t.Errorf("write: %v", err)
			return
		}
		b = b[n:]
		if rng.IntN(16) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

// TestLoopRelaysUnchanged: whatever the message types, sizes and the
// way the bytes are split as they arrive, the loop passes both
// directions through byte for byte (messages larger than MaxMessage in
// pieces), reading while the other side is slow to take them; and a
// Terminate ends the session. The session's two sides are socket pairs,
// the test playing client and server.
func TestLoopRelaysUnchanged(t *testing.T) {
	const held = 1000
	p, err := New(Config{Upstream: "unused:5432", Limits: Limits{MaxMessage: held}, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	l, err := newLoop()
	if err != nil {
		t.Fatal(err)
	}
	defer l.stop()
	p.loop = l
	for seed := range uint64(4) {
		client, proxyClient := socketPair(t)
		proxyUp, server := socketPair(t)
		s := newSession(p, proxyClient, proxyUp)
		s.flow.status.Store('I')
		ended := make(chan error, 1)
		go func() { ended <- s.run(context.Background()) }()

		rng := rand.New(rand.NewPCG(seed, 1))
		up := randomMessages(rng, "QPBDEHSCdcfF", 300, held)
		down := randomMessages(rng, "TDCZNASdG", 300, held)
		go writeChunked(t, client, up, rand.New(rand.NewPCG(seed, 2)))
		go writeChunked(t, server, down, rand.New(rand.NewPCG(seed, 3)))
		for _, c := range []struct {
			name string
			from net.Conn
			want []byte
		}{{"client to server", server, up}, {"server to client", client, down}} {
			got := make([]byte, len(c.want))
			c.from.SetReadDeadline(time.Now().Add(20 * time.Second))
			// The other direction is read only after this one: its
			// bytes wait meanwhile, in the sockets and the loop.
			if _, err := io.ReadFull(c.from, got); err != nil {
				t.Fatalf("seed %d, %s: %v", seed, c.name, err)
			}
			if !bytes.Equal(got, c.want) {
				i := 0
				for i < len(got) && got[i] == c.want[i] {
					i++
				}
				t.Fatalf("seed %d, %s: %d bytes differ from byte %d of %d", seed, c.name, len(got)-i, i, len(c.want))
			}
		}
		client.Write([]byte{'X', 0, 0, 0, 4})
		terminate := make([]byte, 5)
		server.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(server, terminate); err != nil || terminate[0] != 'X' {
			t.Fatalf("seed %d: the Terminate: %q, %v", seed, terminate, err)
		}
		select {
		case err := <-ended:
			if err != nil {
				t.Fatalf("seed %d: the session ended with %v", seed, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("seed %d: the session did not end after a Terminate", seed)
		}
	}
	if st := p.Stats(); st.Looped != 4 {
		t.Errorf("%d of 4 sessions looped", st.Looped)
	}
}
