package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/kernel"
	"github.com/kernpool/kernpool/pool"
)

// docs/openapi.json is the API's contract. These tests hold it to the
// server: every route the server's table serves is documented (and the
// mux answers every documented one), every error code and stream event
// the package defines is in it, every schema names the fields of its Go
// type, and every example decodes strictly into the server's types and
// round-trips through the Go client's.

const openAPIPath = "../../docs/openapi.json"

// goTypes maps each schema's x-go-type to the Go type it documents.
var goTypes = map[string]reflect.Type{
	"api.ExecuteRequest":    reflect.TypeFor[ExecuteRequest](),
	"api.ToolAnswer":        reflect.TypeFor[ToolAnswer](),
	"api.Event":             reflect.TypeFor[Event](),
	"api.KernelList":        reflect.TypeFor[KernelList](),
	"api.KillResponse":      reflect.TypeFor[KillResponse](),
	"api.InterruptResponse": reflect.TypeFor[InterruptResponse](),
	"api.ShutdownResponse":  reflect.TypeFor[ShutdownResponse](),
	"api.Health":            reflect.TypeFor[Health](),
	"api.DrainStatus":       reflect.TypeFor[DrainStatus](),
	"api.ReadyResponse":     reflect.TypeFor[ReadyResponse](),
	"api.Settings":          reflect.TypeFor[Settings](),
	"api.UserSettings":      reflect.TypeFor[UserSettings](),
	"api.ProfileSettings":   reflect.TypeFor[ProfileSettings](),
	"api.ErrorBody":         reflect.TypeFor[ErrorBody](),
	"api.FileWritten":       reflect.TypeFor[FileWritten](),
	"pool.FileEntry":        reflect.TypeFor[pool.FileEntry](),
	"pool.FileListing":      reflect.TypeFor[pool.FileListing](),
	"map[string]string":     reflect.TypeFor[map[string]string](),
	"pool.Limits":           reflect.TypeFor[pool.Limits](),
	"pool.Result":           reflect.TypeFor[pool.Result](),
	"pool.KernelResult":     reflect.TypeFor[pool.KernelResult](),
	"pool.Display":          reflect.TypeFor[pool.Display](),
	"pool.Exception":        reflect.TypeFor[pool.Exception](),
	"pool.ToolCall":         reflect.TypeFor[pool.ToolCall](),
	"pool.KernelInfo":       reflect.TypeFor[pool.KernelInfo](),
	"pool.CheckpointInfo":   reflect.TypeFor[pool.CheckpointInfo](),
	"pool.Variables":        reflect.TypeFor[pool.Variables](),
	"pool.Variable":         reflect.TypeFor[pool.Variable](),
	"pool.PoolStats":        reflect.TypeFor[pool.PoolStats](),
	"kernel.Isolation":      reflect.TypeFor[kernel.Isolation](),
	"pool.SessionSpec":      reflect.TypeFor[pool.SessionSpec](),
	"pool.SessionInfo":      reflect.TypeFor[pool.SessionInfo](),
	"api.SessionList":       reflect.TypeFor[SessionList](),
	"api.SessionDeleted":    reflect.TypeFor[SessionDeleted](),
	"api.SessionRestarted":  reflect.TypeFor[SessionRestarted](),
}

type openAPI struct {
	Paths      map[string]map[string]operation `json:"paths"`
	Components struct {
		Schemas   map[string]map[string]any `json:"schemas"`
		Responses map[string]response       `json:"responses"`
	} `json:"components"`
}

type operation struct {
	OperationID string `json:"operationId"`
	RequestBody *struct {
		Content map[string]media `json:"content"`
	} `json:"requestBody"`
	Responses map[string]response `json:"responses"`
}

type response struct {
	Ref     string           `json:"$ref"`
	Content map[string]media `json:"content"`
}

type media struct {
	Schema   map[string]any `json:"schema"`
	Examples map[string]struct {
		Value json.RawMessage `json:"value"`
	} `json:"examples"`
}

func loadOpenAPI(t *testing.T) *openAPI {
	t.Helper()
	b, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
		openAPI
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", openAPIPath, err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Fatalf("%s: openapi %q, want 3.1.x", openAPIPath, doc.OpenAPI)
	}
	return &doc.openAPI
}

// servedRoutes is the server's own route table, /metrics included (the
// daemon always wires it).
func servedRoutes() (*Server, map[string]bool) {
	s := NewServer(nil, ServerConfig{Metrics: http.NotFoundHandler()})
	out := map[string]bool{}
	for _, r := range s.endpoints() {
		// OpenAPI writes a rest-of-path wildcard {path...} as {path}.
		out[r.method+" "+strings.ReplaceAll(r.path, "...}", "}")] = true
	}
	return s, out
}

func TestOpenAPICoversEveryRoute(t *testing.T) {
	doc := loadOpenAPI(t)
	s, served := servedRoutes()
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	for r := range served {
		if !documented[r] {
			t.Errorf("the server serves %s but docs/openapi.json does not document it", r)
		}
	}
	for r := range documented {
		if !served[r] {
			t.Errorf("docs/openapi.json documents %s but the server's route table has no such route", r)
		}
	}
	// The mux itself knows each documented path: another method is a 405
	// naming the documented one (no handler runs, so no pool is needed).
	param := regexp.MustCompile(`\{[^}]+\}`)
	for path, ops := range doc.Paths {
		var allow []string
		for m := range ops {
			allow = append(allow, strings.ToUpper(m))
			if strings.EqualFold(m, http.MethodGet) {
				allow = append(allow, http.MethodHead)
			}
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodPatch, param.ReplaceAllString(path, "x1"), nil))
		if w.Code != http.StatusMethodNotAllowed {
			t.Errorf("PATCH %s: status %d, want 405 (the mux does not serve the documented path)", path, w.Code)
			continue
		}
		if got := strings.Split(w.Header().Get("Allow"), ", "); !sameSet(got, allow) {
			t.Errorf("%s: Allow %v, docs/openapi.json documents %v", path, got, allow)
		}
	}
}

func TestOpenAPIErrorCodesAndEvents(t *testing.T) {
	doc := loadOpenAPI(t)
	consts := packageConsts(t)
	var codes []string
	for name, v := range consts {
		if strings.HasPrefix(name, "Code") {
			codes = append(codes, v)
		}
	}
	if len(codes) == 0 {
		t.Fatal("found no Code* constants in the package's source")
	}
	if got := enum(t, doc.Components.Schemas["ErrorCode"]); !sameSet(got, codes) {
		t.Errorf("ErrorCode enum %v, the package's Code* constants %v", got, codes)
	}
	// The event names: each Event* constant of the package is a stream
	// event variant (values from the compiled constants, names from the
	// source, so a new constant without its variant fails).
	// (string(...): the constants may be typed.)
	values := map[string]string{"EventStdout": string(EventStdout), "EventStderr": string(EventStderr),
		"EventDisplay": string(EventDisplay), "EventToolCall": string(EventToolCall),
		"EventResult": string(EventResult), "EventError": string(EventError)}
	var events []string
	for name := range consts {
		if strings.HasPrefix(name, "Event") {
			v, ok := values[name]
			if !ok {
				t.Errorf("constant %s is new: add it to this test's map and its variant to StreamEvent", name)
			}
			events = append(events, v)
		}
	}
	mapping, _ := doc.Components.Schemas["StreamEvent"]["discriminator"].(map[string]any)["mapping"].(map[string]any)
	var documented []string
	for name, target := range mapping {
		documented = append(documented, name)
		variant := doc.Components.Schemas[strings.TrimPrefix(target.(string), "#/components/schemas/")]
		ev, _ := variant["properties"].(map[string]any)["event"].(map[string]any)
		if ev["const"] != name {
			t.Errorf("StreamEvent %q maps to a variant whose event is %v", name, ev["const"])
		}
	}
	if !sameSet(documented, events) {
		t.Errorf("StreamEvent variants %v, the package's events %v", documented, events)
	}
	var statuses []string
	for _, st := range pool.Statuses() {
		statuses = append(statuses, string(st))
	}
	if got := enum(t, prop(t, doc, "Result", "status")); !sameSet(got, statuses) {
		t.Errorf("Result.status enum %v, pool.Statuses() %v", got, statuses)
	}
	var modes []string
	for _, m := range kernel.IsolationModes() {
		modes = append(modes, string(m))
	}
	if got := enum(t, prop(t, doc, "Isolation", "mode")); !sameSet(got, modes) {
		t.Errorf("Isolation.mode enum %v, kernel.IsolationModes() %v", got, modes)
	}
	// Every error code is shown by at least one example.
	shown := map[string]bool{}
	for _, r := range doc.Components.Responses {
		for _, m := range r.Content {
			for _, ex := range m.Examples {
				var b ErrorBody
				if json.Unmarshal(ex.Value, &b) == nil {
					shown[b.Code] = true
				}
			}
		}
	}
	for _, c := range codes {
		if !shown[c] {
			t.Errorf("no error response example shows code %q", c)
		}
	}
}

// TestOpenAPISchemasMatchTypes: each schema with an x-go-type lists
// exactly its type's JSON fields, and (for what the server sends) requires
// exactly those it always writes (no omitempty).
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	doc := loadOpenAPI(t)
	requestSide := map[string]bool{"api.ExecuteRequest": true, "api.ToolAnswer": true, "pool.Limits": true, "pool.SessionSpec": true}
	seen := map[string]bool{}
	for name, schema := range doc.Components.Schemas {
		gt, ok := schema["x-go-type"].(string)
		if !ok {
			continue
		}
		typ, ok := goTypes[gt]
		if !ok {
			t.Errorf("schema %s: x-go-type %q is not a type this test knows", name, gt)
			continue
		}
		seen[gt] = true
		if typ.Kind() != reflect.Struct {
			continue
		}
		fields, always := jsonFieldsOf(typ)
		if got := schemaProps(doc, schema); !sameSet(got, fields) {
			t.Errorf("schema %s documents the fields %v; %s has %v", name, sorted(got), gt, sorted(fields))
		}
		if _, union := schema["oneOf"]; union || requestSide[gt] {
			continue
		}
		var req []string
		for _, r := range asSlice(schema["required"]) {
			req = append(req, r.(string))
		}
		if !sameSet(req, always) {
			t.Errorf("schema %s requires %v; %s always writes %v", name, sorted(req), gt, sorted(always))
		}
	}
	for gt := range goTypes {
		if !seen[gt] {
			t.Errorf("no schema has x-go-type %q", gt)
		}
	}
}

func TestOpenAPIExamples(t *testing.T) {
	doc := loadOpenAPI(t)
	n := 0
	for path, ops := range doc.Paths {
		for method, op := range ops {
			where := strings.ToUpper(method) + " " + path
			if op.RequestBody != nil {
				for mt, m := range op.RequestBody.Content {
					for name, ex := range m.Examples {
						n++
						checkRequestExample(t, doc, where+" request "+mt+" "+name, m.Schema, ex.Value)
					}
				}
			}
			for status, r := range op.Responses {
				if r.Ref != "" {
					continue // components/responses are checked below
				}
				for mt, m := range r.Content {
					for name, ex := range m.Examples {
						n++
						checkResponseExample(t, doc, where+" "+status+" "+mt+" "+name, mt, m.Schema, ex.Value)
					}
				}
			}
		}
	}
	for rname, r := range doc.Components.Responses {
		for mt, m := range r.Content {
			for name, ex := range m.Examples {
				n++
				checkResponseExample(t, doc, "response "+rname+" "+name, mt, m.Schema, ex.Value)
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d examples in docs/openapi.json", n)
	}
}

// checkRequestExample decodes a request example as the server does
// (decodeObject: unknown fields refused), then sends it through the Go
// client's encoding and decodes that again: both must mean the same.
func checkRequestExample(t *testing.T, doc *openAPI, where string, schema map[string]any, raw json.RawMessage) {
	t.Helper()
	typ := schemaType(t, doc, where, schema)
	if typ == nil {
		return
	}
	v := reflect.New(typ)
	if err := decodeObject(bytes.NewReader(raw), DefaultMaxBodyBytes, 0, v.Interface()); err != nil {
		t.Errorf("%s: the server refuses it: %v", where, err)
		return
	}
	var sent any = v.Interface()
	if req, ok := sent.(*ExecuteRequest); ok {
		// What the Go client sends for the same pool.Request.
		r := req.Request
		r.Timeout = time.Duration(req.Timeout)
		body := executeBody(r, req.Stream)
		sent = &body
	}
	b, err := json.Marshal(sent)
	if err != nil {
		t.Errorf("%s: encode: %v", where, err)
		return
	}
	again := reflect.New(typ)
	if err := decodeObject(bytes.NewReader(b), DefaultMaxBodyBytes, 0, again.Interface()); err != nil {
		t.Errorf("%s: the Go client's encoding %s is refused: %v", where, b, err)
		return
	}
	if !reflect.DeepEqual(v.Interface(), again.Interface()) {
		t.Errorf("%s: does not round-trip through the Go client:\n example %s\n client  %s", where, raw, b)
	}
}

// checkResponseExample decodes a response example strictly into its Go
// type, and re-encodes it: the server would send exactly the example
// (no field it omits, no value it writes otherwise). A stream example is
// also read by the Go client's stream reader.
func checkResponseExample(t *testing.T, doc *openAPI, where, mediaType string, schema map[string]any, raw json.RawMessage) {
	t.Helper()
	if mediaType == "text/plain" {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Errorf("%s: a text/plain example must be a string: %v", where, err)
		}
		return
	}
	typ := schemaType(t, doc, where, schema)
	if typ == nil {
		return
	}
	if mediaType != "application/x-ndjson" {
		roundTrip(t, where, typ, raw)
		return
	}
	var stream string
	if err := json.Unmarshal(raw, &stream); err != nil {
		t.Errorf("%s: an NDJSON example must be a string of lines: %v", where, err)
		return
	}
	lines := strings.Split(strings.TrimSuffix(stream, "\n"), "\n")
	if typ == reflect.TypeFor[DrainStatus]() {
		// The drain's progress: each line is one status.
		for i, line := range lines {
			roundTrip(t, where+" line "+strconv.Itoa(i+1), typ, json.RawMessage(line))
		}
		return
	}
	var last Event
	for i, line := range lines {
		last = *roundTrip(t, where+" line "+strconv.Itoa(i+1), typ, json.RawMessage(line)).(*Event)
	}
	// The Go client reads the stream: the live events in order, then the
	// result (or the error event's APIError).
	var live []string
	c := NewClient(os.DevNull) // tool-call answers fail to dial; the reader goes on
	h := pool.ToolHandlerFunc(func(context.Context, pool.ToolCall) (string, error) { return "", nil })
	res, err := c.readStream(context.Background(), strings.NewReader(stream), h, func(ev Event) { live = append(live, string(ev.Event)) })
	var want []string
	for _, line := range lines {
		var ev Event
		_ = json.Unmarshal([]byte(line), &ev)
		if ev.Event == EventStdout || ev.Event == EventStderr || ev.Event == EventDisplay {
			want = append(want, string(ev.Event))
		}
	}
	if !slices.Equal(live, want) {
		t.Errorf("%s: the Go client saw the live events %v, want %v", where, live, want)
	}
	switch last.Event {
	case EventResult:
		if err != nil || !reflect.DeepEqual(res, last.Result) {
			t.Errorf("%s: the Go client read %+v, %v; want the last line's result", where, res, err)
		}
	case EventError:
		var ae *APIError
		if !errors.As(err, &ae) || ae.Code != last.Code || ae.Message != last.Error {
			t.Errorf("%s: the Go client returned %v; want the error event's APIError", where, err)
		}
	default:
		t.Errorf("%s: the stream's last line is a %q event, not result or error", where, last.Event)
	}
}

func roundTrip(t *testing.T, where string, typ reflect.Type, raw json.RawMessage) any {
	t.Helper()
	v := reflect.New(typ)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v.Interface()); err != nil {
		t.Errorf("%s: does not decode into %s: %v", where, typ, err)
		return v.Interface()
	}
	b, err := json.Marshal(v.Interface())
	if err != nil {
		t.Errorf("%s: encode: %v", where, err)
		return v.Interface()
	}
	var want, got any
	_ = json.Unmarshal(raw, &want)
	_ = json.Unmarshal(b, &got)
	if !reflect.DeepEqual(want, got) {
		t.Errorf("%s: the server would send something else for the same value:\n example %s\n server  %s", where, compact(raw), b)
	}
	return v.Interface()
}
