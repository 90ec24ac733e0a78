package kind

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/vecside/vecside/internal/store"
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
	for name, k := range map[string]Kind{
		"twice":       testKind("one"),
		"conflicting": testKind("three", Setting{Name: "beam", Max: 20}),
		"nameless":    testKind(""),
		"without New": {Name: "four"},
	} {
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
		"unknown option depth=3 for kind=v (known: store, bits, width)": {"depth": "3"},
		"width=1: want an integer from 2 to 8":                          {"width": "1"},
		"bits=4 contradicts store=ext8":                                 {"store": "ext8", "bits": "4"},
	} {
		if err := k.Validate(o); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: got %v, want ErrInvalidArgument with %q", o, err, want)
		}
	}
	if s, err := k.StoreOf(map[string]string{"bits": "6"}); err != nil || s != store.Ext6 {
		t.Errorf("bits=6: %v, %v", s, err)
	}
}
