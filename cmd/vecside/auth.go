package main

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/vecside/vecside/rpc"
)

// authFlags say how clients log in and whether their connections are
// encrypted.
var authFlags = func() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Category: catSecurity, Name: "auth", Value: rpc.AuthSCRAM, Usage: "client authentication: scram-sha-256 (passwords from --users) or trust (anyone who reaches --listen gets in, and the index holds a copy of every vector: only on loopback or a private network)", EnvVars: []string{"VECSIDE_AUTH"}},
		&cli.StringFlag{Category: catSecurity, Name: "users", Usage: "users file for scram-sha-256: one line per user, \"name\" \"SCRAM-SHA-256$...\", as vecside passwd prints them (PgBouncer's auth_file format); read again at SIGHUP", EnvVars: []string{"VECSIDE_USERS"}},
		&cli.StringFlag{Category: catSecurity, Name: "tls-cert", Usage: "PEM certificate (chain) of the pgwire server: clients that ask get TLS, and SCRAM-SHA-256-PLUS channel binding", EnvVars: []string{"VECSIDE_TLS_CERT"}},
		&cli.StringFlag{Category: catSecurity, Name: "tls-key", Usage: "PEM private key of --tls-cert", EnvVars: []string{"VECSIDE_TLS_KEY"}},
		&cli.BoolFlag{Category: catSecurity, Name: "tls-required", Usage: "refuse clients that do not use TLS (28000); plaintext cancel requests are still accepted", EnvVars: []string{"VECSIDE_TLS_REQUIRED"}},
		&cli.StringFlag{Category: catSecurity, Name: "metrics-tls-cert", Usage: "PEM certificate of the metrics and probes listeners, which then speak HTTPS (probes: scheme HTTPS)", EnvVars: []string{"VECSIDE_METRICS_TLS_CERT"}},
		&cli.StringFlag{Category: catSecurity, Name: "metrics-tls-key", Usage: "PEM private key of --metrics-tls-cert", EnvVars: []string{"VECSIDE_METRICS_TLS_KEY"}},
	}
}()

// serverAuth reads authFlags: the users (nil with trust), the pgwire
// server's TLS and the metrics listener's.
func serverAuth(c *cli.Context) (users *rpc.Users, pgTLS, metricsTLS *tls.Config, err error) {
	switch c.String("auth") {
	case rpc.AuthSCRAM:
		if c.String("users") == "" {
			return nil, nil, nil, errors.New("--auth scram-sha-256 needs --users FILE: make its lines with vecside passwd USER (or pass --auth trust, on loopback only)")
		}
		if users, err = rpc.LoadUsers(c.String("users")); err != nil {
			return nil, nil, nil, err
		}
	case rpc.AuthTrust:
	default:
		return nil, nil, nil, fmt.Errorf("--auth %q: want %s or %s (md5 and plain passwords are not offered)", c.String("auth"), rpc.AuthSCRAM, rpc.AuthTrust)
	}
	if pgTLS, err = loadTLS(c, "tls-cert", "tls-key"); err != nil {
		return nil, nil, nil, err
	}
	if c.Bool("tls-required") && pgTLS == nil {
		return nil, nil, nil, errors.New("--tls-required needs --tls-cert and --tls-key")
	}
	metricsTLS, err = loadTLS(c, "metrics-tls-cert", "metrics-tls-key")
	return users, pgTLS, metricsTLS, err
}

// loadTLS reads a certificate and key named by two flags; nil if neither
// is set.
func loadTLS(c *cli.Context, certFlag, keyFlag string) (*tls.Config, error) {
	cert, key := c.String(certFlag), c.String(keyFlag)
	if cert == "" && key == "" {
		return nil, nil
	}
	if cert == "" || key == "" {
		return nil, fmt.Errorf("--%s and --%s go together", certFlag, keyFlag)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", certFlag, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

var passwdCommand = &cli.Command{
	Name:      "passwd",
	Usage:     "print a users file line for USER, with a SCRAM-SHA-256 verifier of a password",
	ArgsUsage: "USER",
	Description: `Reads the password from the terminal (twice, without echo) or, when stdin
is not a terminal, from its first line. Prints the line to add to the file
that serve --users names:

   "USER" "SCRAM-SHA-256$4096:<salt>$<StoredKey>:<ServerKey>"

The verifier lets the server check a password without storing it: it is
the form PostgreSQL keeps in pg_authid, so a role's existing verifier can
be copied too (SELECT rolpassword FROM pg_authid, as a superuser).`,
	Flags: []cli.Flag{
		&cli.IntFlag{Name: "iterations", Value: rpc.DefaultScramIterations, Usage: "PBKDF2 iterations: more make guessing a stolen file slower, and each login too"},
	},
	Action: func(c *cli.Context) error {
		if c.NArg() != 1 || c.Args().First() == "" {
			return cli.Exit("usage: vecside passwd USER", 2)
		}
		password, err := readPassword(os.Stdin, c.App.ErrWriter)
		if err != nil {
			return err
		}
		v, err := rpc.NewVerifier(password, c.Int("iterations"))
		if err != nil {
			return err
		}
		fmt.Fprintln(c.App.Writer, rpc.UserLine(c.Args().First(), v))
		return nil
	},
}

// readPassword reads a password: from a terminal twice without echo,
// prompting on prompt, or else the first line of in.
func readPassword(in *os.File, prompt io.Writer) (string, error) {
	fd := int(in.Fd())
	state, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil { // not a terminal
		line, err := bufio.NewReader(in).ReadString('\n')
		if err != nil && !(errors.Is(err, io.EOF) && line != "") {
			return "", fmt.Errorf("reading the password from stdin: %w", err)
		}
		return checkPassword(strings.TrimRight(line, "\r\n"))
	}
	quiet := *state
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON | unix.ISIG
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &quiet); err != nil {
		return "", err
	}
	defer unix.IoctlSetTermios(fd, unix.TCSETS, state)
	r := bufio.NewReader(in)
	ask := func(what string) (string, error) {
		fmt.Fprint(prompt, what)
		line, err := r.ReadString('\n')
		fmt.Fprintln(prompt)
		return strings.TrimRight(line, "\r\n"), err
	}
	first, err := ask("Password: ")
	if err != nil {
		return "", err
	}
	again, err := ask("Again: ")
	if err != nil {
		return "", err
	}
	if first != again {
		return "", errors.New("the passwords differ")
	}
	return checkPassword(first)
}

func checkPassword(p string) (string, error) {
	if p == "" {
		return "", errors.New("the password is empty")
	}
	return p, nil
}
