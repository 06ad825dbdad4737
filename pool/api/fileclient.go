package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/kernpool/kernpool/pool"
)

// FileTarget names the kernel whose working dir a files call reaches:
// Kernel (an id), or else Session's live kernel (pool.ErrIdle before the
// session's first cell), or else Owner's live kernel (of Mode when the
// owner has kernels of several modes).
type FileTarget struct {
	Kernel, Owner, Mode string
	Session             string
}

// prefix is the target's path up to "/files" and the query it needs.
func (t FileTarget) prefix() (string, url.Values, error) {
	q := url.Values{}
	switch {
	case t.Kernel != "":
		return "/v1/kernels/" + url.PathEscape(t.Kernel) + "/files", q, nil
	case t.Session != "":
		return "/v1/sessions/" + url.PathEscape(t.Session) + "/files", q, nil
	case t.Owner != "":
		if t.Mode != "" {
			q.Set("mode", t.Mode)
		}
		return "/v1/owners/" + url.PathEscape(t.Owner) + "/files", q, nil
	}
	return "", nil, fmt.Errorf("%w: a file target needs a kernel id, a session id or an owner", ErrBadRequest)
}

// url is the request path of file p of the target (p "" : the listing).
func (t FileTarget) url(p string, extra url.Values) (string, error) {
	base, q, err := t.prefix()
	if err != nil {
		return "", err
	}
	if p != "" {
		base += "/" + escapeFilePath(p)
	}
	for k, v := range extra {
		q[k] = v
	}
	if len(q) > 0 {
		base += "?" + q.Encode()
	}
	return base, nil
}

// fileRequest sends a files request with an optional streamed body.
func (c *Client) fileRequest(ctx context.Context, method, path string, body io.Reader, size int64) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	if body != nil {
		req.ContentLength = size // -1: chunked
		if size == 0 {
			req.Body = http.NoBody
		}
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return c.roundTrip(ctx, req)
}

// UploadFile streams r into path of the target's working dir, as the
// kernel's uid; size is r's length (-1: unknown, sent chunked). The daemon
// refuses a body over the mode's files_max_bytes (413 too_large) or its
// tmpfs (507 no_space) and keeps nothing of it.
func (c *Client) UploadFile(ctx context.Context, t FileTarget, path string, r io.Reader, size int64) (*FileWritten, error) {
	u, err := t.url(path, nil)
	if err != nil {
		return nil, opError("upload", err)
	}
	resp, err := c.fileRequest(ctx, http.MethodPut, u, r, size)
	if err != nil {
		return nil, opError("upload", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, opError("upload", readError(resp))
	}
	var out FileWritten
	if err := decodeResponse(resp, &out); err != nil {
		return nil, opError("upload", err)
	}
	return &out, nil
}

// OpenFile opens path of the target's working dir for streaming: the
// caller reads and closes the body; size is the file's length as the
// response announced it, -1 when it did not (a chunked answer, as a proxy
// in between may give).
func (c *Client) OpenFile(ctx context.Context, t FileTarget, path string) (body io.ReadCloser, size int64, err error) {
	u, err := t.url(path, nil)
	if err != nil {
		return nil, 0, opError("download", err)
	}
	resp, err := c.fileRequest(ctx, http.MethodGet, u, nil, 0)
	if err != nil {
		return nil, 0, opError("download", err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, 0, opError("download", readError(resp))
	}
	return resp.Body, resp.ContentLength, nil
}

// DownloadFile copies path of the target's working dir to w and returns
// the bytes copied; a body shorter than announced is an error (a body
// with no announced length is taken whole).
func (c *Client) DownloadFile(ctx context.Context, t FileTarget, path string, w io.Writer) (int64, error) {
	body, size, err := c.OpenFile(ctx, t, path)
	if err != nil {
		return 0, err
	}
	defer body.Close()
	n, err := io.Copy(w, body)
	if err == nil && size >= 0 && n != size {
		err = fmt.Errorf("%w: %d of %d bytes", io.ErrUnexpectedEOF, n, size)
	}
	if err != nil {
		return n, opError("download", err)
	}
	return n, nil
}

// ListFiles lists dir ("" the working dir) of the target's working dir.
func (c *Client) ListFiles(ctx context.Context, t FileTarget, dir string) (*pool.FileListing, error) {
	var q url.Values
	if dir != "" {
		q = url.Values{"dir": {dir}}
	}
	u, err := t.url("", q)
	if err != nil {
		return nil, opError("list files", err)
	}
	var out pool.FileListing
	if err := c.do(ctx, http.MethodGet, u, nil, &out); err != nil {
		return nil, opError("list files", err)
	}
	return &out, nil
}

// DeleteFile removes path (a file, a symlink itself, or an empty dir)
// of the target's working dir.
func (c *Client) DeleteFile(ctx context.Context, t FileTarget, path string) error {
	u, err := t.url(path, nil)
	if err != nil {
		return opError("delete file", err)
	}
	resp, err := c.fileRequest(ctx, http.MethodDelete, u, nil, 0)
	if err != nil {
		return opError("delete file", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return opError("delete file", readError(resp))
	}
	return nil
}

// escapeFilePath escapes a file path as one URL segment, "/" and "."
// included: the daemon reads the path as is, and no HTTP layer on the
// way cleans a ".." out of it into another endpoint's path first.
func escapeFilePath(p string) string {
	return strings.ReplaceAll(url.PathEscape(p), ".", "%2E")
}
