//go:build cgo

package proxy

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/internal/knnlimits"
	"github.com/vecside/vecside/internal/pgvalue"
)

const (
	// maxRounds bounds how often a statement is run again with more
	// candidates, as heapfetch bounds its widening.
	maxRounds = 4
	// maxCandidates is the most candidates asked for (the sidecar's cap
	// on k × oversample, over its largest default oversampling, 3).
	maxCandidates = knnlimits.MaxCandidates / 3
	// maxResult bounds the bytes of one round's replies the session
	// holds; a larger result passes the statement through.
	maxResult = 16 << 20
	// sidecarBackoff is how long statements pass through without asking
	// after the sidecar failed or stalled, so that a dead sidecar costs
	// one attempt, not one per statement.
	sidecarBackoff = time.Second
	// maxQueryComponent bounds the query vector's components: past it a
	// distance may overflow single precision (pgvector's) to infinity,
	// and rows that tie at infinity come in PostgreSQL's order, not the
	// sidecar's.
	maxQueryComponent = 1e15
	// maxParameters is the most parameters a statement may have, as a
	// Bind message counts them.
	maxParameters = 65535
)

// accelerateQuery answers a simple Query through the sidecar when it can
// prove the answer is PostgreSQL's own; handled is false when the
// message is to be passed through.
func (s *session) accelerateQuery(m message) (handled bool, err error) {
	if s.p.cfg.Sidecar == nil {
		return false, nil
	}
	sql := string(bytes.TrimSuffix(m.body, []byte{0}))
	if !mentionsDistance(sql) {
		return false, nil
	}
	q, reason, done := s.recognize(sql)
	defer done()
	switch {
	case q == nil && reason == "":
		return false, nil
	case q == nil:
	case !s.encoding.plain.Load():
		reason = "encoding"
	case q.params > 0 || q.vector.param > 0:
		reason = "parameter"
	case !s.flow.idle():
		reason = "pipelined"
	case s.flow.status.Load() == 'E':
		reason = "failed transaction"
	case sidecarResting(s.p):
		reason = "sidecar down"
	}
	if reason != "" {
		s.passed(reason)
		return false, nil
	}
	vec, err := pgvalue.ParseVector(q.vector.literal)
	if err != nil {
		s.passed("vector")
		return false, nil
	}
	ix, ok := s.p.cat.lookup(q.schema, q.table, q.column, q.metric, s.probe.schemas)
	if !ok {
		s.passed("not indexed")
		return false, nil
	}
	// Nothing is owed (pending 0, no batch): every reply from now on
	// answers what the session sends.
	s.taken.Store(true)
	defer s.taken.Store(false)
	err = s.answer(q, ix, func() ([]float32, string) { return vec, "" }, nil)
	var pt passThrough
	if errors.As(err, &pt) {
		s.passed(pt.reason)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// passThrough is an answer given up before anything reached the client.
type passThrough struct{ reason string }

func (p passThrough) Error() string { return "pass through: " + p.reason }

// wants is how many candidates a statement asks for first: LIMIT +
// OFFSET, and with an OFFSET as many again, so that a candidate the
// index misses among the rows skipped does not shift the page; "" or why
// the sidecar cannot cover it.
func wants(q *query) (int, string) {
	if q.limit > maxCandidates || q.offset > maxCandidates {
		return 0, "limit"
	}
	want := q.limit + q.offset
	if q.offset > 0 {
		want *= 2
	}
	if want > maxCandidates {
		return 0, "offset"
	}
	return int(want), ""
}

// vectorFault says why the sidecar's order of distances to vec cannot be
// PostgreSQL's, "" if it can: a component not finite or so large that a
// distance may overflow, or, for cosine, a zero vector, to which every
// distance is NaN.
func vectorFault(vec []float32, metric string) string {
	zero := true
	for _, x := range vec {
		if math.IsNaN(float64(x)) || math.Abs(float64(x)) > maxQueryComponent {
			return "vector value"
		}
		zero = zero && x == 0
	}
	if zero && metric == "cosine" {
		return "zero vector"
	}
	return ""
}

// answer runs q restricted to the sidecar's candidates (answering) and
// sends the client the replies, as PostgreSQL sent them, of the last
// round; or it returns a passThrough, before anything reached the
// client. bd is the client's Bind of an extended-protocol statement, nil
// for a simple Query (whose replies are in text, with no BindComplete).
func (s *session) answer(q *query, ix Index, vector func() ([]float32, string), bd *binding) error {
	facts, err := s.probe.check(q, ix, s.p.cat, s.ex.ownRow)
	if again, ok := err.(repick); ok {
		ix = again.ix
		facts, err = s.probe.check(q, ix, s.p.cat, s.ex.ownRow)
	}
	if err != nil {
		return err
	}
	// Decoded once the probe has run: it knows pgvector's type OID.
	vec, reason := vector()
	if reason == "" {
		reason = vectorFault(vec, q.metric)
	}
	if reason != "" {
		return passThrough{reason}
	}
	a := &answering{q: q, ix: ix, bd: bd, facts: facts, vec: vec, options: s.probe.options, systemID: s.probe.systemID,
		fast: facts.fast && ix.Exact && !q.byTarget && !q.half && !q.tieBreak && !q.readsVector(), ex: &s.ex, ask: s.asking.candidates}
	out, pl, err := a.run()
	if err != nil {
		return err
	}
	if pl != nil {
		s.p.stats.accelerated.Add(1)
		if pl.fast {
			s.p.stats.fastPath.Add(1)
		}
		s.lastPlan = pl.String()
	}
	return s.toClient(out...)
}

// asking is a session's requests for candidates, one at a time, which
// its client's cancel request ends.
type asking struct {
	p       *Proxy
	waiting atomic.Pointer[context.CancelFunc] // ends the wait, while it waits
}

// candidates asks the sidecar, waiting at most Config.CandidateWait,
// less if the session's statement_timeout is shorter, and no longer than
// until the client cancels (a CancelRequest for the session); then, or
// when the sidecar fails, the statement passes through. Only the
// sidecar's own trouble (it is unreachable, or stalled past the wait)
// keeps other statements from asking for a while; a statement's fault (a
// wrong dimension) or its session's (a cancel, a short
// statement_timeout, a read-your-writes wait for WAL not yet written,
// as with synchronous_commit off) does not.
func (a *asking) candidates(req heapfetch.Request, statementTimeout time.Duration) ([]heapfetch.Candidate, heapfetch.Source, error) {
	p := a.p
	wait := p.wait
	own := statementTimeout > 0 && statementTimeout < wait
	if own {
		wait = statementTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	a.waiting.Store(&cancel)
	defer a.waiting.Store(nil)
	cands, src, err := p.cfg.Sidecar.Candidates(ctx, req)
	if err != nil {
		cancelled, fault := errors.Is(ctx.Err(), context.Canceled), statementFault(err)
		trouble := !fault && !cancelled && !own
		if trouble && req.MinLSN == "" {
			p.sidecarDown.Store(time.Now().Add(sidecarBackoff).UnixNano())
		}
		if trouble && !p.sidecarTrouble.Swap(true) {
			p.log.Warn("proxy: the sidecar did not answer; statements pass through", "index", req.Index, "err", err)
		}
		p.log.Debug("proxy: the sidecar did not answer; passing through", "index", req.Index, "err", err)
		switch {
		case cancelled:
			return nil, heapfetch.Source{}, passThrough{"cancelled"}
		case fault:
			// The statement's own fault: a vector of another dimension, one
			// the index cannot measure.
			return nil, heapfetch.Source{}, passThrough{"refused by the sidecar: " + refusal(err)}
		case own:
			return nil, heapfetch.Source{}, passThrough{"statement_timeout"}
		}
		return nil, heapfetch.Source{}, passThrough{"sidecar"}
	}
	if p.sidecarTrouble.Load() && p.sidecarTrouble.Swap(false) {
		p.log.Info("proxy: the sidecar answers again", "index", req.Index)
	}
	return cands, src, nil
}

// interrupt ends the session's wait for candidates, if it waits: its
// client cancelled the statement.
func (a *asking) interrupt() {
	if c := a.waiting.Load(); c != nil {
		(*c)()
	}
}

// Array literals of the candidates' keys (each element quoted), xids
// (NULL where none came) and distances (each the shortest form that
// reads back the same double), bound as the restricted statement's
// parameters.
func keyArray(cands []heapfetch.Candidate) []byte {
	return arrayOf(cands, func(b []byte, c heapfetch.Candidate) []byte {
		b = append(b, '"')
		for _, c := range []byte(c.Key) {
			if c == '"' || c == '\\' {
				b = append(b, '\\')
			}
			b = append(b, c)
		}
		return append(b, '"')
	})
}

func xidArray(cands []heapfetch.Candidate) []byte {
	return arrayOf(cands, func(b []byte, c heapfetch.Candidate) []byte {
		if c.Xid == 0 {
			return append(b, "NULL"...)
		}
		return strconv.AppendInt(b, c.Xid, 10)
	})
}

func distanceArray(cands []heapfetch.Candidate) []byte {
	return arrayOf(cands, func(b []byte, c heapfetch.Candidate) []byte {
		return strconv.AppendFloat(b, c.Distance, 'g', -1, 64)
	})
}

// arrayOf is an array literal of an element per candidate, as elem
// appends it.
func arrayOf(cands []heapfetch.Candidate, elem func([]byte, heapfetch.Candidate) []byte) []byte {
	b := []byte{'{'}
	for i, c := range cands {
		if i > 0 {
			b = append(b, ',')
		}
		b = elem(b, c)
	}
	return append(b, '}')
}
