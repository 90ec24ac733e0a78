package indexer

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vecside/vecside/kernels"
)

func TestParseSpec(t *testing.T) {
	s, err := ParseSpec(`docs_emb=Public."My Docs"(Emb) key=ID metric=cosine kind=flat dims=384 where='(id % 2) = 0'`)
	if err != nil {
		t.Fatal(err)
	}
	want := Spec{Name: "docs_emb", Schema: "public", Table: "My Docs", Column: "emb", Key: "id", Metric: kernels.Cosine, Kind: "flat", Dims: 384, Where: "(id % 2) = 0"}
	if s.Name != want.Name || s.Schema != want.Schema || s.Table != want.Table || s.Column != want.Column ||
		s.Key != want.Key || s.Metric != want.Metric || s.Kind != want.Kind || s.Dims != want.Dims || s.Where != want.Where {
		t.Fatalf("got %+v, want %+v", s, want)
	}
	again, err := ParseSpec(s.String())
	if err != nil || again.String() != s.String() {
		t.Fatalf("String does not round-trip: %q → %v", s.String(), err)
	}
	for def, wantErr := range map[string]string{
		"items(embedding) key=id metric=l2":     "index name",
		"Bad=items(e) key=id metric=l2":         "index name",
		"x=items(e) metric=l2":                  "key=KEYCOL is required",
		"x=items(e) key=id":                     "metric=l2|cosine|ip is required",
		"x=items(e) key=id metric=hamming":      "unknown metric",
		"x=items(e) key=id metric=l2 kind=lsh":  "unknown kind",
		"x=items(e) key=id metric=l2 dims=0":    "dims=0",
		"x=items(e) key=id metric=l2 probes=3":  "unknown option",
		"x=items(e) key=id metric=l2 metric=ip": "given twice",
		"x=items e key=id metric=l2":            "SCHEMA.TABLE(COLUMN)",
		`x="unterminated(e) key=id metric=l2`:   "bad table name",
		"x=a.b.c(e) key=id metric=l2":           "bad table name",
		"x=items(e,f) key=id metric=l2":         "bad column name",
	} {
		_, err := ParseSpec(def)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: got %v, want an error containing %q", def, err, wantErr)
		}
	}
}

func TestSearchOptions(t *testing.T) {
	o := DefaultSearchOptions()
	opts, err := ParseOptions("oversample=2.5 timeout=250ms")
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Apply(opts); err != nil {
		t.Fatal(err)
	}
	if o.Oversample != 2.5 || o.Timeout != 250*time.Millisecond {
		t.Fatalf("got %+v", o)
	}
	if n, err := o.Candidates(10); err != nil || n != 25 {
		t.Fatalf("candidates for k=10: %d, %v", n, err)
	}
	if got, _ := o.Get("oversample"); got != "2.5" {
		t.Errorf("Get(oversample) = %q", got)
	}
	for _, bad := range []struct{ k, v string }{{"probes_x", "1"}, {"oversample", "0.5"}, {"oversample", "x"}, {"timeout", "-1s"}} {
		if err := o.Set(bad.k, bad.v); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s=%s: got %v, want ErrInvalidArgument", bad.k, bad.v, err)
		}
	}
	if _, err := o.Candidates(0); !errors.Is(err, ErrInvalidArgument) {
		t.Error("k=0 accepted")
	}
	o.Oversample = 1001
	if _, err := o.Candidates(10); !errors.Is(err, ErrInvalidArgument) {
		t.Error("k × oversample > 10,000 accepted")
	}
	for _, bad := range []string{"a", "a=", "=1", "A=1", "a=1 a=2"} {
		if _, err := ParseOptions(bad); err == nil {
			t.Errorf("ParseOptions(%q) accepted", bad)
		}
	}
}

func TestLSN(t *testing.T) {
	l, err := ParseLSN("16/B374D848")
	if err != nil || l != 0x16B374D848 || l.String() != "16/B374D848" {
		t.Fatalf("got %v %v", l, err)
	}
	if _, err := ParseLSN("16-B3"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("malformed LSN: %v", err)
	}
}

// TestQuotedOptions: a quoted value holds spaces and doubled quotes, and
// String quotes it back so that it parses to the same options.
func TestQuotedOptions(t *testing.T) {
	const s = " where='id % 2 = 0 AND tag <> ''x''' \tlists=4 "
	opts, err := ParseOptions(s)
	if err != nil {
		t.Fatal(err)
	}
	want := Options{"where": "id % 2 = 0 AND tag <> 'x'", "lists": "4"}
	if fmt.Sprint(opts) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", opts, want)
	}
	again, err := ParseOptions(opts.String())
	if err != nil || fmt.Sprint(again) != fmt.Sprint(want) {
		t.Fatalf("%s parsed back to %v, %v", opts.String(), again, err)
	}
	for _, bad := range []string{"a='x", "a=''", "a='x'y", "a=x'y'"} {
		if _, err := ParseOptions(bad); err == nil {
			t.Errorf("ParseOptions(%q) accepted", bad)
		}
	}
}

// TestExactDistances: a store of float vectors, given or the kind's
// default, gives exact distances; codes do not.
func TestExactDistances(t *testing.T) {
	for def, want := range map[string]bool{
		"a=t(v) key=id metric=l2 kind=hnsw store=float": true,
		"a=t(v) key=id metric=l2 kind=flat store=float": true,
		"a=t(v) key=id metric=l2 kind=ivf store=float":  true,
		"a=t(v) key=id metric=l2 kind=hnsw":             false,
		"a=t(v) key=id metric=l2 kind=flat":             true, // flat's default
		"a=t(v) key=id metric=l2 kind=ivf":              false,
		"a=t(v) key=id metric=l2 kind=hnsw bits=8":      false,
		"a=t(v) key=id metric=l2 kind=hnsw store=ext8":  false,
	} {
		spec, err := ParseSpec(def)
		if err != nil {
			t.Fatal(err)
		}
		if got := spec.ExactDistances(); got != want {
			t.Errorf("%s: exact distances %v, want %v", def, got, want)
		}
	}
}
