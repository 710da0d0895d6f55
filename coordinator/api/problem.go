package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// Problem types (docs/api.md, "Errors"). Each is the "type" member of a
// problem document.
const (
	ProblemInvalidRequest = "urn:edgeagent:problem:invalid-request" // 400: not JSON, unknown field, wrong type, bad parameter
	ProblemInvalidJob     = "urn:edgeagent:problem:invalid-job"     // 422: a job the coordinator refuses (bad op, selector, id)
	ProblemUnauthorized   = "urn:edgeagent:problem:unauthorized"    // 401
	ProblemForbidden      = "urn:edgeagent:problem:forbidden"       // 403: scope or project
	ProblemNotFound       = "urn:edgeagent:problem:not-found"       // 404
	ProblemMethod         = "urn:edgeagent:problem:method-not-allowed"
	ProblemConflict       = "urn:edgeagent:problem:conflict"       // 409
	ProblemTooLarge       = "urn:edgeagent:problem:body-too-large" // 413
	ProblemIdempotency    = "urn:edgeagent:problem:idempotency-key-reused"
	ProblemRateLimited    = "urn:edgeagent:problem:rate-limited"    // 429
	ProblemNotImplemented = "urn:edgeagent:problem:not-implemented" // 501
	ProblemInternal       = "urn:edgeagent:problem:internal"        // 500
	ProblemUnavailable    = "urn:edgeagent:problem:unavailable"     // 503: a part the route needs is not configured or not running
	ProblemUnsupported    = "urn:edgeagent:problem:unsupported-media-type"

	// Sessions (docs/sessions.md).
	ProblemSessionLost      = "urn:edgeagent:problem:session-lost"      // 409: the session's lease moved
	ProblemSessionOver      = "urn:edgeagent:problem:session-over"      // 410: closed or ended
	ProblemNoPhone          = "urn:edgeagent:problem:no-phone"          // 503: no matching phone free
	ProblemAgentUnavailable = "urn:edgeagent:problem:agent-unavailable" // 503/504: the agent did not take the step
)

// Problem is an RFC 9457 problem document. Field, when set, names the
// request member or parameter that was wrong ("steps[1].op", "limit").
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	Field    string `json:"field,omitempty"`
}

// Error makes a Problem an error.
func (p *Problem) Error() string { return p.Detail }

// problem builds a Problem.
func problem(status int, typ, field, format string, args ...any) *Problem {
	return &Problem{Type: typ, Title: http.StatusText(status), Status: status, Field: field, Detail: fmt.Sprintf(format, args...)}
}

// WriteProblem writes p as application/problem+json, its instance the
// request's path. Handlers mounted in the API use it for their errors.
func WriteProblem(w http.ResponseWriter, r *http.Request, p *Problem) {
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	if p.Instance == "" && r != nil {
		p.Instance = r.URL.Path
	}
	body, err := json.Marshal(p)
	if err != nil {
		body = []byte(`{"type":"urn:edgeagent:problem:internal","title":"Internal Server Error","status":500}`)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

// NewProblem returns a problem document of status and type with a detail.
func NewProblem(status int, typ, field, detail string) *Problem {
	return problem(status, typ, field, "%s", detail)
}

// WriteJSON writes v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		WriteProblem(w, nil, problem(http.StatusInternalServerError, ProblemInternal, "", "encode reply: %v", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// fieldPathRe matches one element of a validation message's leading path:
// "steps[1]: ", "op: ", "apps.com.Example.shop2: " (a map's key, here a
// package name, follows a dot).
var fieldPathRe = regexp.MustCompile(`^([a-z_][a-z0-9_]*(?:\[\d+\])?(?:\.[A-Za-z0-9_]+)*): `)

// splitField splits a validation message of jobstore.CheckSubmit or
// protocol validation ("steps[1]: op: unknown op \"x\"") into the field
// it names ("steps[1].op") and the rest.
func splitField(msg string) (field, rest string) {
	var parts []string
	for {
		m := fieldPathRe.FindStringSubmatch(msg)
		if m == nil {
			break
		}
		parts = append(parts, m[1])
		msg = msg[len(m[0]):]
	}
	return strings.Join(parts, "."), msg
}

// invalidJob is the problem of a job the coordinator refuses, naming the
// field its message starts with.
func invalidJob(err error) *Problem {
	field, _ := splitField(err.Error())
	return problem(http.StatusUnprocessableEntity, ProblemInvalidJob, field, "%s", err.Error())
}

var unknownFieldRe = regexp.MustCompile(`^json: unknown field "([^"]*)"$`)

// decodeProblem maps an error of decoding a JSON request body to a
// problem naming the field.
func decodeProblem(err error, limit int64) *Problem {
	var (
		maxErr    *http.MaxBytesError
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
		fe        *fieldError
	)
	switch {
	case errors.As(err, &maxErr):
		return problem(http.StatusRequestEntityTooLarge, ProblemTooLarge, "", "request body is larger than the limit of %d bytes (api.max_body_bytes)", limit)
	case errors.As(err, &fe):
		return problem(http.StatusBadRequest, ProblemInvalidRequest, fe.field, "%s: %s", fe.field, fe.msg)
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "(body)"
		}
		return problem(http.StatusBadRequest, ProblemInvalidRequest, field, "%s: want %s, got JSON %s", field, jsonType(typeErr.Type.String()), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return problem(http.StatusBadRequest, ProblemInvalidRequest, "", "request body is not valid JSON: %v (at byte %d)", syntaxErr, syntaxErr.Offset)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return problem(http.StatusBadRequest, ProblemInvalidRequest, "", "request body not received within api.read_timeout")
	case errors.Is(err, errEmptyBody):
		return problem(http.StatusBadRequest, ProblemInvalidRequest, "", "request body is empty: want a JSON object")
	case errors.Is(err, errTrailing):
		return problem(http.StatusBadRequest, ProblemInvalidRequest, "", "request body holds more than one JSON value")
	}
	if m := unknownFieldRe.FindStringSubmatch(err.Error()); m != nil {
		return problem(http.StatusBadRequest, ProblemInvalidRequest, m[1], "%s: unknown field", m[1])
	}
	return problem(http.StatusBadRequest, ProblemInvalidRequest, "", "request body: %v", err)
}

// jsonType names a Go type the way a JSON client thinks of it.
func jsonType(goType string) string {
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "string", goType == "time.Time", goType == "api.Duration":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	}
	return "an object"
}

// fieldError is a request member with a bad value, found while decoding.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

var (
	errEmptyBody = errors.New("empty body")
	errTrailing  = errors.New("trailing data")
)

// badParam is the problem of a bad query parameter.
func badParam(name, format string, args ...any) *Problem {
	return problem(http.StatusBadRequest, ProblemInvalidRequest, name, "%s: %s", name, fmt.Sprintf(format, args...))
}

// retryAfter formats seconds for Retry-After.
func retryAfter(secs int) string { return strconv.Itoa(max(secs, 1)) }
