package heapfetch

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/vecside/vecside/internal/pgvalue"
)

// Querier runs a query: *pgx.Conn, *pgxpool.Pool and pgx.Tx all do.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Config says where a Client's sidecars and heap are.
type Config struct {
	// Shards are the sidecars. Each inner slice is one shard: sidecars
	// serving the same index over the same rows, asked in turn and, when
	// one fails, the next (a search is read-only, so a retry is safe).
	// Several shards each index a slice of the table (a row filter on each
	// sidecar's publication, `--index … where=…`): every search asks one
	// sidecar of each and merges their candidates.
	Shards [][]Querier
	// Heap is where rows are read: the primary or a read replica. A
	// client without one only asks for candidates (Client.Candidates).
	Heap Querier
	// Primary, optional, is where a read-your-writes search with
	// Request.UsePrimary reads when Heap is a replica that has not yet
	// replayed Request.MinLSN.
	Primary Querier
	// SidecarTimeout bounds each attempt on one sidecar of a shard that
	// has others to try: past it the search goes to the next, since a
	// sidecar cut off by the network never answers. 0 takes
	// DefaultSidecarTimeout. A pgx connection whose query is cut short by
	// it is closed; give pools.
	SidecarTimeout time.Duration
}

// DefaultSidecarTimeout is Config.SidecarTimeout's default: above a
// search's usual milliseconds and a read-your-writes wait of a few
// seconds, below the sidecar's own 30 s request timeout.
const DefaultSidecarTimeout = 10 * time.Second

// Client searches through sidecars and reads rows from the heap. Its
// methods may be called concurrently if its Queriers may (pools).
type Client struct {
	shards  []shard
	heap    Querier
	primary Querier
	indexes *lru.Cache[string, *index]
	replica atomic.Int32 // 0 unknown, 1 primary, 2 in recovery
	fast    fastPath
}

// shard is a group of interchangeable sidecars.
type shard struct {
	sidecars []Querier
	next     *atomic.Uint32 // round-robin position
	timeout  time.Duration  // of an attempt, when there are others
	down     []backoff      // per sidecar
}

// New returns a client asking one sidecar for candidates and reading rows
// from heap.
func New(sidecar, heap Querier) *Client {
	c, err := NewClient(Config{Shards: [][]Querier{{sidecar}}, Heap: heap})
	if err != nil {
		panic(err) // unreachable: the config is complete
	}
	return c
}

// NewClient returns a client for cfg.
func NewClient(cfg Config) (*Client, error) {
	if len(cfg.Shards) == 0 {
		return nil, errors.New("heapfetch: Config.Shards is empty: a client needs at least one sidecar")
	}
	cache, err := lru.New[string, *index](256)
	if err != nil {
		panic(err) // only for a size ≤ 0
	}
	c := &Client{heap: cfg.Heap, primary: cfg.Primary, indexes: cache}
	timeout := cfg.SidecarTimeout
	if timeout <= 0 {
		timeout = DefaultSidecarTimeout
	}
	for i, s := range cfg.Shards {
		if len(s) == 0 {
			return nil, fmt.Errorf("heapfetch: Config.Shards[%d] has no sidecar", i)
		}
		c.shards = append(c.shards, shard{sidecars: s, next: new(atomic.Uint32), timeout: timeout, down: make([]backoff, len(s))})
	}
	return c, nil
}

// RegisterTypes prepares a connection to a sidecar for sending query
// vectors: []float32 parameters are encoded in binary directly, where
// pgx's own array encoder handles them element by element through
// interfaces (about 13 µs and 786 allocations for a 784-dimensional
// vector, on every search). Call it for the sidecar pool's connections:
//
//	cfg, _ := pgxpool.ParseConfig(sidecarURL)
//	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
//		heapfetch.RegisterTypes(c.TypeMap())
//		return nil
//	}
func RegisterTypes(m *pgtype.Map) { pgvalue.RegisterFloat4Array(m) }
