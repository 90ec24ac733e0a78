//go:build cgo

package proxy

import (
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
)

// maxOwnStatements bounds the statements a session keeps prepared
// upstream for itself; past it the oldest is closed.
const maxOwnStatements = 16

// ownStatements are the statements a session prepares upstream for
// itself and keeps for its life: the probe, and the restricted form of
// each statement it answers, by text and parameter types. PostgreSQL
// then parses and analyses each once per session, and an answer is one
// round trip, Bind, Execute and Sync, where a statement prepared and
// closed per answer took three. Their names, vecside_proxy_N, are
// never given twice in a session, so a name in doubt is only closed,
// never prepared again: after a DEALLOCATE or DISCARD from the client
// every one is in doubt (forget), and closed in the next answer's
// round trip (Close of a statement that does not exist is no error).
// They are the one trace of the proxy a session can see: rows of
// pg_prepared_statements named vecside_proxy_N.
type ownStatements struct {
	names map[string]string // name by key (statementKey)
	keys  []string          // oldest first
	stale []string          // names to close before the next Parse
	next  int
}

// statementKey identifies a statement by text and parameter types.
func statementKey(sql string, types []uint32) string {
	var b strings.Builder
	b.WriteString(sql)
	for _, t := range types {
		b.WriteByte(0)
		b.WriteString(strconv.FormatUint(uint64(t), 10))
	}
	return b.String()
}

// prepare returns the name of sql prepared with types, and the Parse to
// send for it when it is not prepared yet. Stale statements' Closes are
// to be sent first (closes).
func (o *ownStatements) prepare(sql string, types []uint32) (name string, parse *pgproto3.Parse) {
	key := statementKey(sql, types)
	if name, ok := o.names[key]; ok {
		return name, nil
	}
	if o.names == nil {
		o.names = map[string]string{}
	}
	if len(o.keys) == maxOwnStatements {
		o.drop(o.keys[0])
	}
	o.next++
	name = "vecside_proxy_" + strconv.Itoa(o.next)
	o.names[key] = name
	o.keys = append(o.keys, key)
	return name, &pgproto3.Parse{Name: name, Query: sql, ParameterOIDs: types}
}

// drop puts the statement of key in doubt: its Parse may have failed.
func (o *ownStatements) drop(key string) {
	name, ok := o.names[key]
	if !ok {
		return
	}
	delete(o.names, key)
	for i, k := range o.keys {
		if k == key {
			o.keys = append(o.keys[:i], o.keys[i+1:]...)
			break
		}
	}
	o.stale = append(o.stale, name)
}

// forget puts every statement in doubt: the client may have
// deallocated them.
func (o *ownStatements) forget() {
	for _, key := range append([]string(nil), o.keys...) {
		o.drop(key)
	}
}

// closes returns the Closes owed for statements in doubt, and owes
// them no more.
func (o *ownStatements) closes() []pgproto3.FrontendMessage {
	var out []pgproto3.FrontendMessage
	for _, name := range o.stale {
		out = append(out, &pgproto3.Close{ObjectType: 'S', Name: name})
	}
	o.stale = o.stale[:0]
	return out
}
