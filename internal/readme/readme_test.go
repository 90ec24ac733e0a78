package readme_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vecside/vecside/internal/readme"
)

func parse(t *testing.T, text string) ([]readme.Block, error) {
	path := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return readme.Parse(path)
}

// TestParse: only blocks with a name count; a block in a list item loses
// its fence's indentation and keeps its own; a longer fence holds a
// shorter one.
func TestParse(t *testing.T) {
	blocks, err := parse(t, strings.Join([]string{
		"# title",
		"```sh",
		"not run",
		"```",
		"1. item",
		"   ```sh first",
		"   vecside serve \\",
		"     --listen x",
		"   ```",
		"````md second",
		"```sql inner",
		"````",
		"```",
		"no name",
		"```",
	}, "\n"))
	want := []readme.Block{
		{Lang: "sh", Name: "first", Text: "vecside serve \\\n  --listen x\n", Line: 6},
		{Lang: "md", Name: "second", Text: "```sql inner\n", Line: 10},
	}
	if err != nil || !reflect.DeepEqual(blocks, want) {
		t.Errorf("got %+v, %v\nwant %+v", blocks, err, want)
	}
}

func TestParseErrors(t *testing.T) {
	for _, text := range []string{
		"```sh a\nx\n",
		"```sh a\nx\n```\n```sql a\ny\n```\n",
	} {
		if _, err := parse(t, text); err == nil {
			t.Errorf("%q: no error", text)
		}
	}
}
