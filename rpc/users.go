package rpc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// Users maps user names to their SCRAM-SHA-256 verifiers. Its file
// format is PgBouncer's auth_file: one user a line, the name and the
// verifier each in double quotes (a doubled quote inside stands for
// one), blank lines and lines starting with # or ; ignored:
//
//	"app" "SCRAM-SHA-256$4096:c2FsdA==$...:..."
//
// Only SCRAM-SHA-256 verifiers are accepted: no plain or md5 passwords.
type Users struct {
	verifiers map[string]Verifier
	// mockIterations is what an unknown user's mock exchange announces:
	// the count most users have, so it gives nothing away.
	mockIterations int
}

// LoadUsers reads a users file.
func LoadUsers(path string) (*Users, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("rpc: users file: %w", err)
	}
	defer f.Close()
	u, err := ParseUsers(f)
	if err != nil {
		return nil, fmt.Errorf("rpc: users file %s: %w", path, err)
	}
	return u, nil
}

// ParseUsers reads users in the file format.
func ParseUsers(r io.Reader) (*Users, error) {
	u := &Users{verifiers: map[string]Verifier{}}
	iterations := map[int]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		name, rest, err := quotedField(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		secret, rest, err := quotedField(strings.TrimLeft(rest, " \t"))
		if err == nil && strings.TrimSpace(rest) != "" {
			err = fmt.Errorf("text after the verifier")
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		v, err := ParseVerifier(secret)
		if err != nil {
			return nil, fmt.Errorf("line %d, user %q: %w", n, name, err)
		}
		if _, dup := u.verifiers[name]; dup {
			return nil, fmt.Errorf("line %d: user %q appears twice", n, name)
		}
		u.verifiers[name] = v
		iterations[v.Iterations]++
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	u.mockIterations = DefaultScramIterations
	for it, n := range iterations {
		if n > iterations[u.mockIterations] || n == iterations[u.mockIterations] && it < u.mockIterations {
			u.mockIterations = it
		}
	}
	return u, nil
}

// quotedField reads a double-quoted field at the start of s and returns
// it and what follows.
func quotedField(s string) (string, string, error) {
	if !strings.HasPrefix(s, `"`) {
		return "", "", fmt.Errorf(`want "name" "SCRAM-SHA-256$..."`)
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != '"' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '"' {
			b.WriteByte('"')
			i++
			continue
		}
		return b.String(), s[i+1:], nil
	}
	return "", "", fmt.Errorf("a quote is not closed")
}

// UserLine is the line of the users file for user and v.
func UserLine(user string, v Verifier) string {
	q := func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
	return q(user) + " " + q(v.String())
}

// Len is how many users there are.
func (u *Users) Len() int { return len(u.verifiers) }

func (u *Users) lookup(user string) (Verifier, bool) {
	v, ok := u.verifiers[user]
	return v, ok
}
