package api

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kernpool/kernpool/pool"
)

// Body errors with their own status (wrapped in ErrBadRequest).
var (
	errTooLarge    = errors.New("request body too large")
	errBodyTimeout = errors.New("request body too slow")
)

// decodeBody reads exactly one JSON object from r's body into dst,
// refusing anything but an object (null, arrays, scalars), unknown
// fields, wrong types, trailing data, bodies over limit (errTooLarge) and
// bodies that take longer than timeout to arrive (errBodyTimeout). The
// error message names the problem (field, expected type) and wraps
// ErrBadRequest.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration, dst any) error {
	body := http.MaxBytesReader(w, r.Body, limit)
	if timeout <= 0 {
		return decodeObject(body, limit, timeout, dst)
	}
	// A slow client holds no more than its deadline; the deadline goes
	// once the body is in, since a cell may run much longer.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(timeout))
	// A decoded body was read to its end, and there net/http cleared the
	// deadline itself (it starts its read for a client hanging up):
	// clearing it again costs a timer update per request, 2 µs on a
	// loaded host. TestCellOutlastsBodyDeadline holds net/http to it.
	// A refused body keeps the deadline: after the answer net/http reads
	// what is left of it (up to 256 KiB) to reuse the connection, and a
	// client trickling that rest would hold the connection for as long as
	// it liked (TestRefusedBodyCannotHoldTheConnection); the next request's
	// read sets a deadline of its own.
	err := decodeObject(body, limit, timeout, dst)
	return err
}

// decodeObject is decodeBody's parsing half (the fuzz target).
func decodeObject(body io.Reader, limit int64, timeout time.Duration, dst any) error {
	// A small buffer: expectObject reads a byte or a few, and the decoder's
	// own larger reads then bypass it. Pooled: one per request otherwise.
	br := smallReaders.Get().(*bufio.Reader)
	br.Reset(body)
	defer func() {
		br.Reset(nil) // drops body
		smallReaders.Put(br)
	}()
	if err := expectObject(br); err != nil {
		return describeDecodeError(err, limit, timeout, dst)
	}
	dec := json.NewDecoder(br)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return describeDecodeError(err, limit, timeout, dst)
	}
	// Exactly one value: anything after it (but whitespace) is an error.
	// Reading to EOF also lets the server notice a client disconnect.
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return describeDecodeError(err, limit, timeout, dst)
		}
		return fmt.Errorf("%w: unexpected data after the JSON object", ErrBadRequest)
	}
	return nil
}

// smallReaders are decodeObject's 64-byte readers.
var smallReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64) }}

// expectObject checks, before decoding, that the body's first value
// starts an object: encoding/json would take null for an empty request.
func expectObject(br *bufio.Reader) error {
	for {
		c, err := br.ReadByte()
		if err != nil {
			return err
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return br.UnreadByte()
		}
		return fmt.Errorf("%w: expected a JSON object, got %s", ErrBadRequest, jsonKind([]byte{c}))
	}
}

func describeDecodeError(err error, limit int64, timeout time.Duration, dst any) error {
	var (
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
		maxErr    *http.MaxBytesError
	)
	switch {
	case errors.Is(err, ErrBadRequest), errors.Is(err, pool.ErrBadRequest):
		return err // from a field's own UnmarshalJSON; already names the field
	case errors.As(err, &maxErr):
		return fmt.Errorf("%w: %w: the request body exceeds %d bytes", ErrBadRequest, errTooLarge, limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: %w: the request body did not arrive within %s", ErrBadRequest, errBodyTimeout, timeout)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: empty body: expected a JSON object", ErrBadRequest)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: malformed JSON: the body ends in the middle of a value", ErrBadRequest)
	case errors.As(err, &syntaxErr):
		return fmt.Errorf("%w: malformed JSON at byte %d: %s", ErrBadRequest, syntaxErr.Offset, strings.TrimPrefix(syntaxErr.Error(), "json: "))
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return fmt.Errorf("%w: expected a JSON object, got %s", ErrBadRequest, typeErr.Value)
		}
		// Fields of the embedded pool.Request are reported as "Request.x";
		// on the wire they are plain "x".
		field := strings.TrimPrefix(typeErr.Field, "Request.")
		return fmt.Errorf("%w: field %q: expected %s, got %s", ErrBadRequest, field, describeType(typeErr.Type), typeErr.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return fmt.Errorf("%w: unknown field %s (known fields: %s)", ErrBadRequest, name, strings.Join(jsonFields(reflect.TypeOf(dst)), ", "))
	}
	return fmt.Errorf("%w: malformed JSON: %s", ErrBadRequest, strings.TrimPrefix(err.Error(), "json: "))
}

// describeType names a Go type the way a JSON author thinks of it.
func describeType(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array of " + strings.TrimPrefix(strings.TrimPrefix(describeType(t.Elem()), "a "), "an ") + "s"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return describeType(t.Elem())
	}
	return "a " + t.Kind().String()
}

// jsonFields lists the JSON names a struct type accepts (embedded structs
// flattened), sorted, for the unknown-field message.
func jsonFields(t reflect.Type) []string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	seen := map[string]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			seen[name] = true
		}
	}
	walk(t)
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
