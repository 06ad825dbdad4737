package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// displayFiles is the preference order of a display's mime types for a
// file, with the file's extension.
var displayFiles = []struct{ mime, ext string }{
	{"image/png", "png"}, {"image/jpeg", "jpg"}, {"image/svg+xml", "svg"},
	{"text/html", "html"}, {"text/markdown", "md"}, {"text/latex", "tex"},
	{"application/json", "json"}, {"text/plain", "txt"},
}

// displayWriter shows displays: each into a file of dir (and its path on
// stdout), or without dir its text/plain on stdout.
type displayWriter struct {
	e   *env
	dir string
	mu  sync.Mutex
	n   int
}

func (w *displayWriter) show(d *pool.Display) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dir == "" {
		var text string
		if json.Unmarshal(d.Data["text/plain"], &text) == nil && text != "" {
			fmt.Fprintln(w.e.stdout, text)
		}
		return
	}
	path, err := w.write(d)
	if err != nil {
		fmt.Fprintf(w.e.stderr, "kernpool exec: display not written: %v\n", err)
		return
	}
	fmt.Fprintln(w.e.stdout, path)
}

// write stores d's preferred mime type in a new file of w.dir.
func (w *displayWriter) write(d *pool.Display) (string, error) {
	for _, f := range displayFiles {
		raw, ok := d.Data[f.mime]
		if !ok {
			continue
		}
		data, err := displayBytes(f.mime, raw)
		if err != nil {
			return "", err
		}
		for {
			w.n++
			path := filepath.Join(w.dir, fmt.Sprintf("display-%d.%s", w.n, f.ext))
			file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if errors.Is(err, os.ErrExist) {
				continue
			}
			if err != nil {
				return "", fmt.Errorf("write display: %w", err)
			}
			_, err = file.Write(data)
			if cerr := file.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return "", fmt.Errorf("write display: %w", err)
			}
			return path, nil
		}
	}
	return "", errors.New("write display: no known mime type")
}

// displayBytes decodes one mime value: base64 for images other than
// SVG, a string for text, JSON as is.
func displayBytes(mime string, raw json.RawMessage) ([]byte, error) {
	if mime == "application/json" {
		return raw, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("display %s: %w", mime, err)
	}
	if mime == "image/png" || mime == "image/jpeg" {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("display %s: %w", mime, err)
		}
		return b, nil
	}
	return []byte(s), nil
}

// liveOutput prints a streamed cell's events as they come: stdout and
// stderr text to the terminal's, displays through dw.
func liveOutput(e *env, dw *displayWriter) func(api.Event) {
	return func(ev api.Event) {
		switch ev.Event {
		case api.EventStdout:
			_, _ = io.WriteString(e.stdout, ev.Text)
		case api.EventStderr:
			_, _ = io.WriteString(e.stderr, ev.Text)
		case api.EventDisplay:
			if ev.Display != nil {
				dw.show(ev.Display)
			}
		}
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
