// Command _asm generates the amd64 assembly of package kernels, and the Go
// declarations of its functions, with avo (github.com/mmcloughlin/avo).
//
// Run it as `go generate ./kernels` from the repository root (the directive
// in kernels/doc.go runs `go run -C _asm . -out ..`); it rewrites every
// kernels/*_amd64.s file and its *_amd64.go declarations. CI regenerates
// them and fails on any difference, so the generated files are never edited
// by hand.
//
// Where an AVX2 kernel and its AVX-512 twin share a loop structure, one Go
// function emits both, parameterised by a width (width.go). What the
// kernels would repeat is shared in the assembly too: kernels that end
// alike jump to one file-local routine (routine, tailJump), and a kernel
// of both widths and several operations whose calls are long enough to
// hide a branch is one body whose kind argument picks the loop
// (eachWidth, either); those a search calls once per vector (pairF32,
// packedI8) have a body each. Each file's exact semantics
// (rounding, NaN, length multiples, who handles the tail) are stated
// once, in its header constant, which goes into the generated file.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"strings"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/buildtags"
	"github.com/mmcloughlin/avo/ir"
	"github.com/mmcloughlin/avo/pass"
	"github.com/mmcloughlin/avo/printer"
)

// constraint, amd64 && gc && !noasm, is the build constraint of every
// generated file; the pure-Go side (impl_generic.go) carries its exact
// opposite, !amd64 || !gc || noasm.
var constraint = buildtags.Opt("amd64", "gc", buildtags.Not("noasm"))

// file is one generated assembly file and its Go declarations.
type file struct {
	name   string // base name: name_amd64.s and name_amd64.go
	header string // the semantics, written at the top of the assembly
	decls  string // Go declarations besides the functions', if any
	build  func(g gen)
}

var files = []file{
	{"f32", f32Header, kindDecls, buildF32},
	{"int8", int8Header, "", buildInt8},
	{"scan", scanHeader, "", buildScan},
	{"prefetch", prefetchHeader, "", buildPrefetch},
}

// gen emits the instructions of one file.
type gen struct{ *build.Context }

func main() {
	// Not flag.CommandLine: avo's build package registers its own flags there.
	flags := flag.NewFlagSet("_asm", flag.ExitOnError)
	out := flags.String("out", "..", "directory of package kernels")
	flags.Parse(os.Args[1:])
	for _, f := range files {
		if err := generate(f, *out); err != nil {
			fmt.Fprintf(os.Stderr, "kernels/_asm: %s: %v\n", f.name, err)
			os.Exit(1)
		}
	}
}

func generate(f file, dir string) error {
	g := gen{build.NewContext()}
	g.Constraints(constraint)
	f.build(g)
	prog, err := g.Result()
	if err != nil {
		return err
	}
	if err := pass.Compile.Execute(prog); err != nil {
		return err
	}
	cfg := printer.Config{Name: "avo from kernels/_asm", Pkg: "kernels"}
	asm, err := printer.NewGoAsm(cfg).Print(prog)
	if err != nil {
		return err
	}
	// The header goes between the build constraint and the #include.
	include := []byte("\n#include")
	if !bytes.Contains(asm, include) {
		return fmt.Errorf("no #include in the generated assembly")
	}
	asm = bytes.Replace(asm, include, append(comment(f.header), include...), 1)
	stubs, err := printer.NewStubs(cfg).Print(declared(prog))
	if err != nil {
		return err
	}
	if stubs, err = format.Source(append(stubs, f.decls...)); err != nil {
		return err
	}
	base := filepath.Join(dir, f.name+"_amd64")
	if err := os.WriteFile(base+".s", asm, 0o644); err != nil {
		return err
	}
	return os.WriteFile(base+".go", stubs, 0o644)
}

// declared returns the part of f that Go code calls: f without the
// file-local routines (static(), width.go), which have no Go declaration.
func declared(f *ir.File) *ir.File {
	d := &ir.File{Constraints: f.Constraints, Includes: f.Includes}
	for _, s := range f.Sections {
		if fn, ok := s.(*ir.Function); !ok || !strings.HasSuffix(fn.Name, "<>") {
			d.Sections = append(d.Sections, s)
		}
	}
	return d
}

// comment turns text into a block of // lines, preceded by a blank line.
func comment(text string) []byte {
	var b bytes.Buffer
	b.WriteString("\n")
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		b.WriteString(strings.TrimRight("// "+line, " ") + "\n")
	}
	return b.Bytes()
}
