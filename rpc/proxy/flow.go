//go:build cgo

package proxy

import "sync/atomic"

// flow is where a session's protocol stands: what PostgreSQL still owes
// for the client's messages that went through, and the transaction
// status it last reported. Both relays and the session's goroutine read
// it; what the upstream side changes is atomic.
type flow struct {
	// status is the transaction status of the last ReadyForQuery: 'I'
	// idle, 'T' in a transaction block, 'E' in a failed one.
	status atomic.Uint32
	// pending counts the ReadyForQuery messages PostgreSQL still owes: one
	// per Query, Sync and FunctionCall sent. batch: extended-protocol
	// messages were sent since the last Sync.
	pending atomic.Int32
	batch   bool
	// describing: the client prepared a statement, described it and
	// flushed, without a Sync (Parse, Describe, Flush, as postgres.js
	// does before its Bind), and describeOwed counts the replies
	// PostgreSQL still owes that; once they have come and none failed
	// (describeFailed), the batch the client sends next may be held and
	// answered as if nothing were owed.
	describing     bool
	describeOwed   atomic.Int32
	describeFailed atomic.Bool
	// terminated: the client's Terminate went upstream, alone or ending
	// a held batch; the session ends once it is flushed.
	terminated bool
}

// sent notes a client message that went upstream, and reports whether
// it may change the session's settings (a statement that runs).
func (f *flow) sent(typ byte) (runs bool) {
	f.describing = f.describing && typ == 'H'
	switch typ {
	case 'X':
		f.terminated = true
	case 'Q', 'F': // a FunctionCall owes a ReadyForQuery as a Query does
		f.pending.Add(1)
		return true
	case 'S':
		f.pending.Add(1)
		f.batch = false
	case 'P', 'B', 'D', 'E', 'C', 'H':
		f.batch = true
		return typ == 'E'
	}
	return false
}

// expectDescribe notes that a batch going through owes owed replies to
// a Parse and a Describe (0: it is not one that only describes).
func (f *flow) expectDescribe(owed int32) {
	f.describeOwed.Store(owed)
	f.describeFailed.Store(false)
}

// settled reports whether nothing sent is unanswered, so that a batch
// starting now may be held and answered: no ReadyForQuery owed, and no
// batch open but one that only described and whose replies have all
// come, none an error.
func (f *flow) settled() bool {
	described := f.describing && f.describeOwed.Load() == 0 && !f.describeFailed.Load()
	return f.pending.Load() == 0 && (!f.batch || described)
}

// owed reports whether PostgreSQL owes replies the client waits for.
func (f *flow) owed() bool { return f.pending.Load() > 0 || f.describeOwed.Load() > 0 }

// idle reports whether neither a ReadyForQuery nor a batch is open.
func (f *flow) idle() bool { return f.pending.Load() == 0 && !f.batch }

// watches reports whether a reply of PostgreSQL's, of n body bytes, is
// one flow or the session follows, to be read whole as it passes: a
// ReadyForQuery, a ParameterStatus, or a reply to a Parse or Describe
// still owed.
func (f *flow) watches(typ byte, n, held int) bool {
	return typ == 'Z' && n == 1 || typ == 'S' && n <= held || describeReply(typ) && f.describeOwed.Load() > 0 && n <= held
}

// replied follows a ReadyForQuery, or a reply to a Parse or Describe
// still owed.
func (f *flow) replied(m message) {
	switch m.typ {
	case 'Z':
		f.status.Store(uint32(m.body[0]))
		f.pending.Add(-1)
	case 'E':
		f.describeFailed.Store(true)
		f.describeOwed.Store(0)
	default: // one of describeReply's, while owed
		f.describeOwed.Add(-1)
	}
}

// describeReply reports whether a reply of type typ may answer a Parse
// or a Describe of a statement: ParseComplete, ParameterDescription,
// RowDescription, NoData, or an error.
func describeReply(typ byte) bool {
	return typ == '1' || typ == 't' || typ == 'T' || typ == 'n' || typ == 'E'
}
