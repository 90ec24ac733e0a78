package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestDemo runs the demo on a small data set: exact recall, through
// heapfetch and (a cgo build) pgvector's statement through the proxy,
// and every live change visible in the next answer.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := runDemo(context.Background(), &out, demoParams{rows: 2000, dims: 16, queries: 5, seed: 3}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	wants := []string{
		"recall@10 = 1.00",
		// Progress while exact SQL answers the queries.
		"1 of 5 queries answered both ways",
		"5 of 5 queries answered both ways",
		"nearest: id 1000001 at 0.0000 (want 1000001 at 0)",
		"id 1000001 in top 10: false",
		"in top 10: false\n",
		"done; removing the throwaway database",
	}
	if demoHasProxy {
		wants = append(wants, "(through the proxy; 5 of 5 answered through the sidecar)",
			"SHOW vecside.last_plan: accelerated: index items_embedding;")
	}
	for _, want := range wants {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}
