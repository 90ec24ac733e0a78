package sidecar

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestMockAuthSecretPersists: the secret of unknown users' salts is the
// same on every start with one data directory, and a file cut short is
// replaced.
func TestMockAuthSecretPersists(t *testing.T) {
	dir := t.TempDir()
	first, err := mockAuthSecret(dir)
	if err != nil || len(first) != mockSecretLen {
		t.Fatalf("first start: %x, %v", first, err)
	}
	again, err := mockAuthSecret(dir)
	if err != nil || !bytes.Equal(first, again) {
		t.Fatalf("second start: %x (%v), want %x", again, err, first)
	}
	if other, _ := mockAuthSecret(t.TempDir()); bytes.Equal(other, first) {
		t.Fatal("two data directories share a secret")
	}
	path := filepath.Join(dir, "mock_auth_secret")
	if err := os.WriteFile(path, first[:5], 0o600); err != nil {
		t.Fatal(err)
	}
	if fixed, err := mockAuthSecret(dir); err != nil || len(fixed) != mockSecretLen {
		t.Fatalf("after a short write: %x, %v", fixed, err)
	}
	if none, err := mockAuthSecret(""); none != nil || err != nil {
		t.Fatalf("without a data directory: %x, %v; want none", none, err)
	}
}
