// Package readme reads the executable blocks of a Markdown file: fenced
// blocks whose info string names them after the language, as in
// ```` ```sql role-setup ````. Renderers show only the language, so a
// reader sees an ordinary block; tests find a block by its name, or take
// every named block in order and run them as a reader would type them
// (Walk). A block without a name is prose: output, sketches, fragments.
package readme

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// Block is one named fenced block.
type Block struct {
	Lang, Name string
	Text       string // the lines between the fences, each ending in \n
	Line       int    // the opening fence's line, from 1
}

// Parse returns the named blocks of the Markdown file at path, in order.
func Parse(path string) ([]Block, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var blocks []Block
	var cur *Block
	var fence string // the open fence ("```" or longer), "" outside a block
	var pad string   // its indentation, taken off each line of the block
	for i, line := range strings.SplitAfter(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if fence == "" {
			if !strings.HasPrefix(trimmed, "```") {
				continue
			}
			fence = trimmed[:len(trimmed)-len(strings.TrimLeft(trimmed, "`"))]
			pad = line[:len(line)-len(strings.TrimLeft(line, " "))]
			if f := strings.Fields(trimmed[len(fence):]); len(f) == 2 {
				blocks = append(blocks, Block{Lang: f[0], Name: f[1], Line: i + 1})
				cur = &blocks[len(blocks)-1]
			}
			continue
		}
		if trimmed == fence {
			if cur != nil && !strings.HasSuffix(cur.Text, "\n") {
				cur.Text += "\n"
			}
			fence, cur = "", nil
			continue
		}
		if cur != nil {
			// A block inside a list item is indented as its fence is.
			cur.Text += strings.TrimPrefix(line, pad)
		}
	}
	if fence != "" {
		return nil, fmt.Errorf("readme: %s: a block is never closed", path)
	}
	for i, b := range blocks {
		for _, o := range blocks[:i] {
			if o.Name == b.Name {
				return nil, fmt.Errorf("readme: %s: two blocks named %s (lines %d and %d)", path, b.Name, o.Line, b.Line)
			}
		}
	}
	return blocks, nil
}

// Named is the text of the block of path with that language and name; it
// fails the test if there is none.
func Named(t testing.TB, path, lang, name string) string {
	t.Helper()
	blocks, err := Parse(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		if b.Lang == lang && b.Name == name {
			return b.Text
		}
	}
	t.Fatalf("%s has no ```%s %s block", path, lang, name)
	return ""
}
