package rpc

import (
	"strings"

	"github.com/vecside/vecside/indexer"
)

// serverVersion is the PostgreSQL version vecside claims: clients parse it
// to pick protocol features, and 15's are the ones implemented.
const serverVersion = "15.0"

// vecsidePrefix marks the settings that are search options.
const vecsidePrefix = "vecside."

// parameter is a PostgreSQL setting a client may read, and perhaps SET.
// None changes what vecside does: they exist so that drivers, psql and
// dblink find the values they check at startup.
type parameter struct {
	name     string // as reported, e.g. DateStyle
	value    string // the default
	report   bool   // sent as ParameterStatus at startup and when SET
	readOnly bool
	// check validates a value and returns it normalised; nil takes any.
	check func(string) (string, error)
}

// parameters are keyed by lower-case name, as settings are looked up.
var parameters = map[string]parameter{
	"application_name":                    {name: "application_name", report: true},
	"client_encoding":                     {name: "client_encoding", value: "UTF8", report: true, check: checkEncoding},
	"client_min_messages":                 {name: "client_min_messages", value: "notice"},
	"datestyle":                           {name: "DateStyle", value: "ISO, MDY", report: true},
	"extra_float_digits":                  {name: "extra_float_digits", value: "1"},
	"idle_in_transaction_session_timeout": {name: "idle_in_transaction_session_timeout", value: "0"},
	"integer_datetimes":                   {name: "integer_datetimes", value: "on", report: true, readOnly: true},
	"intervalstyle":                       {name: "IntervalStyle", value: "postgres", report: true},
	"is_superuser":                        {name: "is_superuser", value: "off", report: true, readOnly: true},
	"lock_timeout":                        {name: "lock_timeout", value: "0"},
	"search_path":                         {name: "search_path", value: `"$user", public`},
	"server_encoding":                     {name: "server_encoding", value: "UTF8", report: true, readOnly: true},
	"server_version":                      {name: "server_version", value: serverVersion, report: true, readOnly: true},
	"session_authorization":               {name: "session_authorization", report: true, readOnly: true},
	"standard_conforming_strings":         {name: "standard_conforming_strings", value: "on", report: true, check: checkStandardStrings},
	"statement_timeout":                   {name: "statement_timeout", value: "0"},
	"timezone":                            {name: "TimeZone", value: "UTC", report: true},
}

// checkEncoding accepts UTF8 under its spellings, and SQL_ASCII (psql's
// choice under the C locale), which is a subset of it.
func checkEncoding(v string) (string, error) {
	switch strings.ToLower(strings.ReplaceAll(strings.ReplaceAll(v, "-", ""), "_", "")) {
	case "utf8", "unicode", "sqlascii":
		return "UTF8", nil
	}
	return "", errorf(codeInvalidParameterValue, "client_encoding %q is not supported: vecside speaks UTF8 only", v).
		withHint("set client_encoding to UTF8 (PGCLIENTENCODING=UTF8)")
}

// checkStandardStrings refuses off: the lexer reads backslashes in strings
// as ordinary characters.
func checkStandardStrings(v string) (string, error) {
	if strings.EqualFold(v, "on") {
		return "on", nil
	}
	return "", errorf(codeInvalidParameterValue, "standard_conforming_strings must stay on")
}

// session is a connection's settings: the search options SET through
// vecside.<key>, and the parameters above.
type session struct {
	search   indexer.SearchOptions
	defaults indexer.SearchOptions
	values   map[string]string // lower-case name → value, for set parameters
	user     string
}

func newSession(user string, defaults indexer.SearchOptions) *session {
	return &session{search: defaults, defaults: defaults, values: map[string]string{}, user: user}
}

// statusChange is a ParameterStatus the client must be sent.
type statusChange struct{ name, value string }

// reported lists every reported parameter, for the startup ParameterStatus.
func (s *session) reported() []statusChange {
	var out []statusChange
	for key, p := range parameters {
		if p.report {
			out = append(out, statusChange{p.name, s.get(key)})
		}
	}
	return out
}

func (s *session) get(key string) string {
	if v, ok := s.values[key]; ok {
		return v
	}
	if key == "session_authorization" {
		return s.user
	}
	return parameters[key].value
}

// set changes a setting. It returns the ParameterStatus to send, if any.
func (s *session) set(name, value string) ([]statusChange, error) {
	key := strings.ToLower(name)
	if opt, ok := strings.CutPrefix(key, vecsidePrefix); ok {
		return nil, s.search.Set(opt, value)
	}
	p, err := lookupParameter(key)
	if err != nil {
		return nil, err
	}
	if p.readOnly {
		return nil, errorf(codeCantChangeRuntimeParam, "parameter %q cannot be changed", p.name)
	}
	if p.check != nil {
		if value, err = p.check(value); err != nil {
			return nil, err
		}
	}
	s.values[key] = value
	if !p.report {
		return nil, nil
	}
	return []statusChange{{p.name, value}}, nil
}

// show returns a setting's value and the name SHOW titles it with.
func (s *session) show(name string) (title, value string, err error) {
	key := strings.ToLower(name)
	if opt, ok := strings.CutPrefix(key, vecsidePrefix); ok {
		v, err := s.search.Get(opt)
		return key, v, err
	}
	p, err := lookupParameter(key)
	if err != nil {
		return "", "", err
	}
	return p.name, s.get(key), nil
}

// reset returns a setting to its default.
func (s *session) reset(name string) ([]statusChange, error) {
	key := strings.ToLower(name)
	if opt, ok := strings.CutPrefix(key, vecsidePrefix); ok {
		v, err := s.defaults.Get(opt)
		if err != nil {
			return nil, err
		}
		return nil, s.search.Set(opt, v)
	}
	p, err := lookupParameter(key)
	if err != nil {
		return nil, err
	}
	if p.readOnly {
		return nil, errorf(codeCantChangeRuntimeParam, "parameter %q cannot be changed", p.name)
	}
	_, was := s.values[key]
	delete(s.values, key)
	if !p.report || !was {
		return nil, nil
	}
	return []statusChange{{p.name, p.value}}, nil
}

// resetAll returns every setting to its default, as RESET ALL and DISCARD
// ALL do.
func (s *session) resetAll() []statusChange {
	s.search = s.defaults
	var out []statusChange
	for key := range s.values {
		if p := parameters[key]; p.report {
			out = append(out, statusChange{p.name, p.value})
		}
	}
	clear(s.values)
	return out
}

func lookupParameter(key string) (parameter, error) {
	p, ok := parameters[key]
	if !ok {
		return p, errorf(codeUndefinedObject, "unrecognized configuration parameter %q", key).
			withHint("vecside's own settings are vecside.%s", strings.Join(indexer.SearchOptionKeys(), ", vecside."))
	}
	return p, nil
}
