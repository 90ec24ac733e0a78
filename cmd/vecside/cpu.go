package main

import (
	"github.com/urfave/cli/v2"
	"github.com/vecside/vecside/kernels"
)

var cpuCommand = &cli.Command{
	Name:  "cpu",
	Usage: "print the CPU features vecside uses and the kernel implementation chosen for each",
	Action: func(c *cli.Context) error {
		return kernels.Describe(c.App.Writer)
	},
}
