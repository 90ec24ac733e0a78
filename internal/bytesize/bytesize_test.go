package bytesize

import "testing"

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{"1000": 1000, "512MiB": 512 << 20, "6GiB": 6 << 30, "1.5KiB": 1536, "2 GiB": 2 << 30} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "lots", "5MB"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}
