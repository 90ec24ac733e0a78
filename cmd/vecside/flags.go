package main

import (
	"reflect"

	"github.com/urfave/cli/v2"
)

// The categories of serve's and proxy's --help, in the order a reader
// sets them up. urfave/cli prints categories sorted by name, hence the
// numbers.
const (
	catSource      = "1. Source and indexes:"
	catListeners   = "2. Listeners:"
	catSecurity    = "3. Authentication and TLS:"
	catLimits      = "4. Client limits:"
	catCheckpoints = "5. Checkpoints:"
	catSearches    = "6. Searches and memory:"
	catProxy       = "7. Proxy (--proxy):"
)

// categorized returns copies of flags in category cat: flags that several
// commands share stay uncategorized where a command lists no categories.
// Every flag type of urfave/cli is a struct with a Category field.
func categorized(cat string, flags ...cli.Flag) []cli.Flag {
	out := make([]cli.Flag, len(flags))
	for i, f := range flags {
		c := reflect.New(reflect.TypeOf(f).Elem())
		c.Elem().Set(reflect.ValueOf(f).Elem())
		c.Elem().FieldByName("Category").SetString(cat)
		out[i] = c.Interface().(cli.Flag)
	}
	return out
}
