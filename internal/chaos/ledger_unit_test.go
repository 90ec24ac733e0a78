package chaos

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/vecside/vecside/indexer"
)

// TestLedgerCheck: an answer served at or past a delete's LSN must not
// hold the key; one served before it may; keys never written and keys
// given twice are wrong at any LSN.
func TestLedgerCheck(t *testing.T) {
	l := newLedger(10)
	l.writing(12)
	l.committed(time.Now(), 100, []int64{3})
	for _, c := range []struct {
		keys   []int64
		served indexer.LSN
		want   string // a part of the only complaint; "" for none
	}{
		{[]int64{1, 3, 12}, 99, ""},
		{[]int64{1, 3}, 100, "key 3 deleted at 0/64"},
		{[]int64{3}, 200, "key 3 deleted"},
		{[]int64{13}, 0, "key 13 was never written"},
		{[]int64{0}, 0, "key 0 was never written"},
		{[]int64{5, 5}, 0, "key 5 twice"},
	} {
		bad := l.check(c.keys, c.served)
		switch {
		case c.want == "" && len(bad) > 0, c.want != "" && (len(bad) != 1 || !strings.Contains(bad[0], c.want)):
			t.Errorf("keys %v served at %d: got %q, want %q", c.keys, c.served, bad, c.want)
		}
	}
}

// TestClassify: only a failure to reach the sidecar within a restart (or
// soakGrace after it) is the restart's; a 53300 refusal elsewhere is
// counted apart; everything else is an error.
func TestClassify(t *testing.T) {
	t0 := time.Now()
	s := &soak{outages: []outage{{from: t0, to: t0.Add(time.Second)}}}
	refused := &pgconn.PgError{Code: "53300"}
	for _, c := range []struct {
		at        time.Duration
		err       error
		transient bool
		want      failureClass
	}{
		{500 * time.Millisecond, errors.New("connection refused"), true, classRestart},
		{time.Second + soakGrace - time.Millisecond, errors.New("EOF"), true, classRestart},
		{time.Second + soakGrace + time.Millisecond, errors.New("EOF"), true, classError},
		{-time.Millisecond, errors.New("EOF"), true, classError},
		{500 * time.Millisecond, &pgconn.PgError{Code: "42601"}, false, classError},
		{time.Minute, refused, true, classRefused},
		{time.Minute, refused, false, classError},
	} {
		s.events = nil
		s.failed("search", c.err, c.transient)
		s.events[0].at = t0.Add(c.at)
		if got := s.classify(s.events[0]); got != c.want {
			t.Errorf("%v at %s (transient %v): class %d, want %d", c.err, c.at, c.transient, got, c.want)
		}
	}
}
