package api

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

// The files API streams bodies both ways: an upload is copied from the
// request body into the kernel's working area as it arrives (bounded by
// the mode's files_max_bytes), a download from the file to the response.
// Each is addressed by kernel id, by owner (with ?mode= when the owner
// has kernels of several modes), as interrupts are, or by session id (the
// session's live kernel; 409 idle before its first cell, since a file
// call never starts a kernel).

// CodeNoSpace (507): the kernel's working area (its tmpfs) is full.
const CodeNoSpace = "no_space"

// CodeNotRegular (409): the path is a directory, symlink or special file.
const CodeNotRegular = "not_regular"

// fileTarget resolves the kernel a files request addresses, answering
// the error itself when there is none ("" then).
func (s *Server) fileTarget(w http.ResponseWriter, r *http.Request) string {
	if id := r.PathValue("id"); id != "" {
		if s.hideKernel(w, r, id) {
			return ""
		}
		return id
	}
	if sid := r.PathValue("session"); sid != "" {
		kid, _ := s.sessionKernel(w, r, sid)
		return kid
	}
	owner := r.PathValue("owner")
	if forbidOwner(w, r, owner) {
		return ""
	}
	id, err := s.pool.KernelOf(owner, r.URL.Query().Get("mode"))
	if err != nil {
		s.writePoolError(w, err)
		return ""
	}
	return id
}

func (s *Server) handleFileGet(w http.ResponseWriter, r *http.Request) {
	id := s.fileTarget(w, r)
	if id == "" {
		return
	}
	f, size, err := s.pool.OpenFile(id, r.PathValue("path"))
	if err != nil {
		s.writePoolError(w, err)
		return
	}
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	// The file may grow while it is sent: no more than announced. A
	// client that stops reading holds the handler no longer than
	// streamWriteTimeout per chunk.
	out := &idleWriter{w: w, rc: http.NewResponseController(w), idle: streamWriteTimeout}
	_, _ = io.Copy(out, io.LimitReader(f, size)) // the client may be gone
}

// FileWritten answers an upload.
type FileWritten struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

func (s *Server) handleFilePut(w http.ResponseWriter, r *http.Request) {
	id := s.fileTarget(w, r)
	if id == "" {
		return
	}
	path := r.PathValue("path")
	body := &idleReader{r: r.Body, rc: http.NewResponseController(w), idle: s.cfg.BodyReadTimeout}
	defer func() { _ = body.rc.SetReadDeadline(time.Time{}) }()
	n, err := s.pool.WriteFile(r.Context(), id, path, body, r.ContentLength)
	if err != nil {
		if r.ContentLength > 0 {
			// The rest of a refused body is not read: the connection goes.
			w.Header().Set("Connection", "close")
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusRequestTimeout, CodeTimeout, err.Error())
			return
		}
		s.writePoolError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, FileWritten{Path: path, Bytes: n})
}

func (s *Server) handleFileDelete(w http.ResponseWriter, r *http.Request) {
	id := s.fileTarget(w, r)
	if id == "" {
		return
	}
	if err := s.pool.DeleteFile(id, r.PathValue("path")); err != nil {
		s.writePoolError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleFileList(w http.ResponseWriter, r *http.Request) {
	id := s.fileTarget(w, r)
	if id == "" {
		return
	}
	l, err := s.pool.ListFiles(id, r.URL.Query().Get("dir"))
	if err != nil {
		s.writePoolError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// idleReader is a request body whose every read must make progress
// within idle: a slow client holds an upload no longer than that between
// chunks, while a large upload at a steady pace takes what it needs.
type idleReader struct {
	r    io.Reader
	rc   *http.ResponseController
	idle time.Duration
}

// idleWriter is a response body whose every write must make progress
// within idle.
type idleWriter struct {
	w    io.Writer
	rc   *http.ResponseController
	idle time.Duration
}

func (b *idleWriter) Write(p []byte) (int, error) {
	_ = b.rc.SetWriteDeadline(time.Now().Add(b.idle))
	return b.w.Write(p)
}

func (b *idleReader) Read(p []byte) (int, error) {
	if b.idle > 0 {
		_ = b.rc.SetReadDeadline(time.Now().Add(b.idle))
	}
	return b.r.Read(p)
}
