package indexer

import (
	"errors"

	"github.com/vecside/vecside/indexer/kind"
)

// Sentinel errors, for errors.Is. The RPC maps each to a SQLSTATE.
var (
	// ErrUnknownIndex: no index of that name (42704).
	ErrUnknownIndex = errors.New("unknown index")
	// ErrInvalidVector: a query vector of the wrong dimension, unparsable,
	// or not finite (22023).
	ErrInvalidVector = errors.New("invalid vector")
	// ErrInvalidArgument: k, an option or its value is out of range (22023).
	// The kinds' option errors wrap it too.
	ErrInvalidArgument = kind.ErrInvalidArgument
	// ErrNotReady: the index is still being built or is in error (55000).
	ErrNotReady = errors.New("index not ready")
	// ErrTimeout: the request's deadline passed (57014).
	ErrTimeout = errors.New("deadline exceeded")
	// ErrOverloaded: more searches are running and queued than the
	// sidecar admits (53000); retrying after a pause is safe.
	ErrOverloaded = errors.New("too many searches at once")
)
