package indexer_test

import (
	"testing"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/indexer/kindtest"
)

// Every registered kind passes the conformance suite, at its default
// store and with exact vectors.
func TestKindConformance(t *testing.T) {
	for _, k := range indexer.Kinds() {
		for _, store := range []string{"", " store=float"} {
			def := "kind=" + k + store
			t.Run(def, func(t *testing.T) { kindtest.Run(t, def) })
		}
	}
}
