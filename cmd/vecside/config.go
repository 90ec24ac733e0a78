package main

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"
)

// configFlag names a YAML file of flag values. It is read before the
// command line is parsed (applyConfig); the flag itself is declared so
// that the parser accepts it, before or after the command's name.
var configFlag = &cli.StringFlag{
	Name:    "config",
	Usage:   "a YAML file of settings, one key per flag (listen: 0.0.0.0:6433, index: [...]); VECSIDE_* variables and flags override it",
	EnvVars: []string{"VECSIDE_CONFIG"},
}

// applyConfig reads the file --config (or VECSIDE_CONFIG) names, for the
// command args run, and sets, for each flag of that command it gives a
// value, the flag's VECSIDE_* variable unless the environment already
// sets it. The precedence follows: the file gives way to the environment,
// which gives way to the command line; and a file can supply a required
// flag. One file serves every command: a key of another command's flag
// is left alone, and a key that is no flag of any command is an error
// that names it, as is a key for a flag without a variable.
func applyConfig(app *cli.App, args []string) error {
	cmd, path := configTarget(app, args)
	if path == "" {
		path = os.Getenv("VECSIDE_CONFIG")
	}
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var settings map[string]any
	if err := yaml.Unmarshal(data, &settings); err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	flags := slices.Clone(app.Flags)
	name := "vecside"
	if cmd != nil {
		flags, name = append(flags, cmd.Flags...), "vecside "+cmd.Name
	}
	for _, key := range slices.Sorted(maps.Keys(settings)) {
		f := findFlag(flags, key)
		if key == configFlag.Name || f == nil && !anyCommandHas(app, key) {
			return fmt.Errorf("--config %s: %q is not a flag of %s, nor of another command (see %s --help)", path, key, name, name)
		}
		if f == nil {
			continue
		}
		envs := f.(cli.DocGenerationFlag).GetEnvVars()
		if len(envs) == 0 {
			return fmt.Errorf("--config %s: --%s cannot be set from a file: give it on the command line", path, key)
		}
		if slices.ContainsFunc(envs, func(e string) bool { _, set := os.LookupEnv(e); return set }) {
			continue
		}
		value, err := configValue(settings[key])
		if err != nil {
			return fmt.Errorf("--config %s: %s: %w", path, key, err)
		}
		os.Setenv(envs[0], value)
	}
	return nil
}

// configTarget finds the command args run and the --config flag's value,
// wherever it stands; values of other flags are skipped so as not to be
// taken for the command.
func configTarget(app *cli.App, args []string) (cmd *cli.Command, path string) {
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			if cmd == nil {
				if cmd = app.Command(a); cmd == nil {
					return nil, path
				}
			}
			continue
		}
		name, value, inline := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if inline {
			if name == configFlag.Name {
				path = value
			}
			continue
		}
		flags := app.Flags
		if cmd != nil {
			flags = append(slices.Clone(flags), cmd.Flags...)
		}
		f := findFlag(flags, name)
		if _, isBool := f.(*cli.BoolFlag); f == nil || isBool || i+1 == len(args) {
			continue
		}
		i++
		if name == configFlag.Name {
			path = args[i]
		}
	}
	return cmd, path
}

func anyCommandHas(app *cli.App, name string) bool {
	for _, c := range app.Commands {
		if findFlag(c.Flags, name) != nil {
			return true
		}
	}
	return false
}

func findFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

// listSeparator separates the items of a list variable (VECSIDE_INDEX):
// a newline, which no index definition holds, where a where= condition
// may hold commas.
const listSeparator = "\n"

// configValue renders a YAML value as its flag's variable reads it: a
// list as items separated by listSeparator.
func configValue(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", fmt.Errorf("no value")
	case []any:
		items := make([]string, len(v))
		for i, item := range v {
			s := fmt.Sprint(item)
			if strings.Contains(s, listSeparator) {
				return "", fmt.Errorf("item %q holds a line break, which would split it in two: give it as a flag", s)
			}
			items[i] = s
		}
		return strings.Join(items, listSeparator), nil
	case map[string]any:
		return "", fmt.Errorf("want a value or a list, not a mapping")
	}
	return fmt.Sprint(v), nil
}
