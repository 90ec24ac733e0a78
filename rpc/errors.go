package rpc

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgvalue"
)

// SQLSTATEs sent by the server, named as in PostgreSQL's errcodes.txt.
const (
	codeNullValueNotAllowed      = "22004"
	codeCharacterNotInRepertoire = "22021"
	codeInvalidParameterValue    = "22023"
	codeInvalidTextRepresent     = "22P02"
	codeInvalidBinaryRepresent   = "22P03"
	codeActiveSQLTransaction     = "25001"
	codeInFailedSQLTransaction   = "25P02"
	codeNoActiveSQLTransaction   = "25P01"
	codeInvalidSQLStatementName  = "26000"
	codeInvalidAuthorization     = "28000"
	codeInvalidPassword          = "28P01"
	codeInvalidCursorName        = "34000"
	codeUndefinedParameter       = "42P02"
	codeDuplicateCursor          = "42P03"
	codeDuplicatePreparedStmt    = "42P05"
	codeIndeterminateDatatype    = "42P18"
	codeSyntaxError              = "42601"
	codeUndefinedColumn          = "42703"
	codeGroupingError            = "42803"
	codeUndefinedObject          = "42704"
	codeUndefinedFunction        = "42883"
	codeDatatypeMismatch         = "42804"
	codeFeatureNotSupported      = "0A000"
	codeProtocolViolation        = "08P01"
	codeConnectionFailure        = "08006"
	codeInsufficientResources    = "53000"
	codeTooManyConnections       = "53300"
	codeProgramLimitExceeded     = "54000"
	codeTooManyColumns           = "54011"
	codeNotInPrerequisiteState   = "55000"
	codeCantChangeRuntimeParam   = "55P02"
	codeQueryCanceled            = "57014"
	codeAdminShutdown            = "57P01"
	codeIdleSessionTimeout       = "57P05"
	codeInternalError            = "XX000"
	codeSuccess                  = "00000"
)

// pgError is an error a client sees as an ErrorResponse. Errors that are
// not pgErrors are mapped by toPgError.
type pgError struct {
	code     string // SQLSTATE
	msg      string
	detail   string
	hint     string
	position int // 1-based character offset into the query, 0 if none
	fatal    bool
}

func (e *pgError) Error() string { return e.msg }

func errorf(code, format string, args ...any) *pgError {
	return &pgError{code: code, msg: fmt.Sprintf(format, args...)}
}

func (e *pgError) withHint(format string, args ...any) *pgError {
	e.hint = fmt.Sprintf(format, args...)
	return e
}

// protocolViolation is an error after which the message stream cannot be
// trusted: the connection is closed after reporting it.
func protocolViolation(format string, args ...any) *pgError {
	e := errorf(codeProtocolViolation, format, args...)
	e.fatal = true
	return e
}

// toPgError maps an error to what the client is told, using the
// indexer's sentinel errors for their SQLSTATEs.
func toPgError(err error) *pgError {
	var pe *pgError
	if errors.As(err, &pe) {
		return pe
	}
	code, hint := codeInternalError, ""
	switch {
	case errors.Is(err, indexer.ErrUnknownIndex):
		code = codeUndefinedObject
	case errors.Is(err, indexer.ErrInvalidVector),
		errors.Is(err, pgvalue.ErrMalformedVector),
		errors.Is(err, indexer.ErrInvalidArgument):
		code = codeInvalidParameterValue
	case errors.Is(err, indexer.ErrNotReady):
		code = codeNotInPrerequisiteState
	case errors.Is(err, indexer.ErrOverloaded):
		code = codeInsufficientResources
		hint = "the sidecar is running as many searches as it admits; retrying after a pause is safe"
	case errors.Is(err, indexer.ErrTimeout),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, context.Canceled):
		code = codeQueryCanceled
	}
	pe = &pgError{code: code, msg: err.Error(), hint: hint}
	var d interface{ Detail() string }
	if errors.As(err, &d) {
		pe.detail = d.Detail()
	}
	return pe
}

// message renders the error for the wire.
func (e *pgError) message() *pgproto3.ErrorResponse {
	sev := "ERROR"
	if e.fatal {
		sev = "FATAL"
	}
	return &pgproto3.ErrorResponse{
		Severity:            sev,
		SeverityUnlocalized: sev,
		Code:                e.code,
		Message:             e.msg,
		Detail:              e.detail,
		Hint:                e.hint,
		Position:            int32(e.position),
	}
}

// stateOf is the code a request that ended with err is counted under.
func stateOf(err error) string {
	if err == nil {
		return codeSuccess
	}
	return toPgError(err).code
}
