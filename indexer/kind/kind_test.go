package kind

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/vecside/vecside/indexer/store"
)

func testKind(name string, settings ...Setting) Kind {
	return Kind{
		Name:     name,
		Options:  []string{"width"},
		Store:    store.Float,
		New:      func(map[string]string, store.CodedConfig, [][]float32, int) (Index, error) { return nil, nil },
		Load:     func(map[string]string, store.CodedConfig, io.Reader) (Index, error) { return nil, nil },
		Settings: settings,
	}
}

func TestRegister(t *testing.T) {
	Register(testKind("one", Setting{Name: "beam", Max: 10}))
	Register(testKind("two", Setting{Name: "beam", Max: 10})) // the same setting, shared
	if k, ok := Lookup("one"); !ok || k.Name != "one" {
		t.Fatalf("Lookup(one) = %v, %v", k.Name, ok)
	}
	if names := Names(); !slices.Equal(names, []string{"one", "two"}) {
		t.Fatalf("Names() = %v", names)
	}
	if s, ok := LookupSetting("beam"); !ok || s.Max != 10 || !slices.Equal(SettingNames(), []string{"beam"}) {
		t.Fatalf("LookupSetting(beam) = %v, %v; SettingNames %v", s, ok, SettingNames())
	}
	refused(t, map[string]Kind{
		"twice":       testKind("one"),
		"conflicting": testKind("three", Setting{Name: "beam", Max: 20}),
		"nameless":    testKind(""),
		"without New": {Name: "four"},
	})
}

func TestRegisterFigures(t *testing.T) {
	figured := func(name string, figures ...*Figure) Kind {
		k := testKind(name)
		k.Figures = figures
		return k
	}
	waiting := &Figure{Name: "waiting_rows", Help: "Rows waiting.", Type: Gauge}
	linked := &Figure{Name: "linked_total", Help: "Rows linked.", Type: Counter}
	Register(figured("f1", waiting, linked))
	Register(figured("f2", &Figure{Name: "waiting_rows", Help: "Rows waiting.", Type: Gauge})) // the same figure, shared
	if got := Figures(); len(got) != 2 || got[0] != linked || *got[1] != *waiting {
		t.Fatalf("Figures() = %v, want linked_total and waiting_rows once each", got)
	}
	refused(t, map[string]Kind{
		"a bad name":           figured("g1", &Figure{Name: "Waiting", Help: "x", Type: Gauge}),
		"no help":              figured("g2", &Figure{Name: "waiting", Type: Gauge}),
		"a counter sans total": figured("g3", &Figure{Name: "linked", Help: "x", Type: Counter}),
		"a gauge with total":   figured("g4", &Figure{Name: "linked_total", Help: "x", Type: Memory}),
		"an unknown type":      figured("g5", &Figure{Name: "linked", Help: "x", Type: Memory + 1}),
		"declared twice":       figured("g6", waiting, waiting),
		"other help":           figured("g7", &Figure{Name: "waiting_rows", Help: "Other rows.", Type: Gauge}),
		"other type":           figured("g8", &Figure{Name: "waiting_rows", Help: "Rows waiting.", Type: Memory}),
	})
}

func TestStats(t *testing.T) {
	graph := &Figure{Name: "graph_bytes", Help: "Memory of the graph.", Type: Memory}
	waiting := &Figure{Name: "waiting_rows", Help: "Rows waiting.", Type: Gauge}
	st := Stats{Rows: 4, CodeBytes: 10, FloatBytes: 20, KeyBytes: 30, Figures: []Reading{{graph, 40}, {waiting, -1}}}
	if st.Bytes() != 100 || st.BytesPerRow() != 25 {
		t.Errorf("Bytes %d, BytesPerRow %g: want the graph's memory counted, 100 and 25", st.Bytes(), st.BytesPerRow())
	}
	if v, ok := st.Value("waiting_rows"); !ok || v != -1 {
		t.Errorf("Value(waiting_rows) = %g, %v", v, ok)
	}
	if _, ok := st.Value("lists"); ok {
		t.Error("Value of a figure not reported")
	}
	if got := st.FigurePairs(); got != "graph_bytes=40 waiting_rows=-1" {
		t.Errorf("FigurePairs() = %q", got)
	}
}

// refused checks that Register panics on each of kinds.
func refused(t *testing.T, kinds map[string]Kind) {
	t.Helper()
	for name, k := range kinds {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Register did not panic", name)
				}
			}()
			Register(k)
		}()
	}
}

func TestValidate(t *testing.T) {
	k := testKind("v")
	k.Check = func(o map[string]string) error {
		_, err := Int(o, "width", 2, 8)
		return err
	}
	for _, ok := range []map[string]string{nil, {"width": "2"}, {"store": "ext4", "bits": "4"}} {
		if err := k.Validate(ok); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	for want, o := range map[string]map[string]string{
		"unknown option depth=3 for kind=v (known: store, bits, recall, width)": {"depth": "3"},
		"width=1: want an integer from 2 to 8":                                  {"width": "1"},
		"bits=4 contradicts store=ext8":                                         {"store": "ext8", "bits": "4"},
	} {
		if err := k.Validate(o); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: got %v, want ErrInvalidArgument with %q", o, err, want)
		}
	}
	if s, err := k.StoreOf(map[string]string{"bits": "6"}); err != nil || s != store.Ext6 {
		t.Errorf("bits=6: %v, %v", s, err)
	}
}
