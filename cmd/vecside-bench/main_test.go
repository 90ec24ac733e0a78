package main

import (
	"testing"

	"github.com/vecside/vecside/internal/clitest"
	"github.com/vecside/vecside/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// run runs the command line with args and returns what it printed.
func run(t *testing.T, args ...string) (string, error) {
	return clitest.Run(t, newApp(), append([]string{"vecside-bench"}, args...)...)
}
