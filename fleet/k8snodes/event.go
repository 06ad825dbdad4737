package k8snodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// watchEvent is one event of a watch stream.
type watchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// watch applies the events after resource version rv until the stream
// ends, returning the last version seen (nil error: the API server
// closed the watch at its timeout; watch again from there).
func (m *Members) watch(ctx context.Context, rv string) (string, error) {
	q := url.Values{"watch": {"true"}, "resourceVersion": {rv}, "allowWatchBookmarks": {"true"},
		"timeoutSeconds": {strconv.Itoa(watchSeconds)}}
	resp, err := m.get(ctx, m.path(q))
	if err != nil {
		return rv, err
	}
	defer resp.Body.Close()
	body := &capReader{r: resp.Body}
	dec := json.NewDecoder(body)
	for {
		body.left = maxEvent
		var ev watchEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) && ctx.Err() == nil {
				return rv, nil
			}
			return rv, fmt.Errorf("%w: watch endpointslices: %v", ErrAPI, err)
		}
		if rv, err = m.apply(ev, rv); err != nil {
			return rv, err
		}
	}
}

// apply applies one event, returning the resource version after it.
func (m *Members) apply(ev watchEvent, rv string) (string, error) {
	if ev.Type == "ERROR" {
		var st struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(ev.Object, &st)
		if st.Code == http.StatusGone {
			return rv, errGone
		}
		return rv, fmt.Errorf("%w: watch: %d %s", ErrAPI, st.Code, st.Message)
	}
	var s endpointSlice
	if err := json.Unmarshal(ev.Object, &s); err != nil {
		return rv, fmt.Errorf("%w: watch event %s: %v", ErrAPI, ev.Type, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch ev.Type {
	case "ADDED", "MODIFIED":
		m.slices[s.Metadata.Name] = s.Endpoints
	case "DELETED":
		delete(m.slices, s.Metadata.Name)
	case "BOOKMARK":
	default:
		return rv, fmt.Errorf("%w: watch event type %q", ErrAPI, ev.Type)
	}
	if s.Metadata.ResourceVersion != "" {
		rv = s.Metadata.ResourceVersion
	}
	return rv, nil
}

// capReader fails a read past left bytes (reset for each event): one
// event cannot make the router hold without bound.
type capReader struct {
	r    io.Reader
	left int64
}

var errEventTooBig = errors.New("watch event larger than 8 MiB")

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errEventTooBig
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}
