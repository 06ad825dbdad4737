package main

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// Options describe the image.
type Options struct {
	Rootfs     string
	Tag        string
	Entrypoint []string
	Cmd        []string
	Env        []string
	Epoch      int64
	Arch       string
}

// imageConfig is the part of the OCI/docker image config kernpool's
// images set.
type imageConfig struct {
	Architecture string        `json:"architecture"`
	OS           string        `json:"os"`
	Created      string        `json:"created"`
	Config       runConfig     `json:"config"`
	RootFS       rootFS        `json:"rootfs"`
	History      []historyItem `json:"history"`
}

type runConfig struct {
	Env        []string `json:"Env,omitempty"`
	Entrypoint []string `json:"Entrypoint,omitempty"`
	Cmd        []string `json:"Cmd,omitempty"`
	WorkingDir string   `json:"WorkingDir"`
}

type rootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type historyItem struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
}

// manifestEntry is one image of a docker-archive's manifest.json.
type manifestEntry struct {
	Config   string   `json:"Config"`
	RepoTags []string `json:"RepoTags"`
	Layers   []string `json:"Layers"`
}

// Write writes o's image as a docker-archive to w and returns the
// image id (the config's digest).
func Write(w io.Writer, o Options) (string, error) {
	layer, err := os.CreateTemp("", "mkimage-layer-*")
	if err != nil {
		return "", fmt.Errorf("create layer: %w", err)
	}
	defer os.Remove(layer.Name())
	defer layer.Close()
	h := sha256.New()
	if err := writeLayer(io.MultiWriter(layer, h), o.Rootfs, o.Epoch); err != nil {
		return "", err
	}
	layerHex := hex.EncodeToString(h.Sum(nil))
	cfg, err := json.Marshal(configOf(o, layerHex))
	if err != nil {
		return "", fmt.Errorf("encode config: %w", err)
	}
	cfgSum := sha256.Sum256(cfg)
	cfgHex := hex.EncodeToString(cfgSum[:])
	man, err := json.Marshal([]manifestEntry{{
		Config:   "blobs/sha256/" + cfgHex,
		RepoTags: []string{o.Tag},
		Layers:   []string{"blobs/sha256/" + layerHex},
	}})
	if err != nil {
		return "", fmt.Errorf("encode manifest: %w", err)
	}
	tw := tar.NewWriter(w)
	mtime := time.Unix(o.Epoch, 0).UTC()
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return "", fmt.Errorf("write archive: %w", err)
		}
	}
	if err := addBytes(tw, "blobs/sha256/"+cfgHex, cfg, mtime); err != nil {
		return "", err
	}
	if err := addFile(tw, "blobs/sha256/"+layerHex, layer, mtime); err != nil {
		return "", err
	}
	if err := addBytes(tw, "manifest.json", man, mtime); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", fmt.Errorf("write archive: %w", err)
	}
	return "sha256:" + cfgHex, nil
}

func configOf(o Options, layerHex string) imageConfig {
	created := time.Unix(o.Epoch, 0).UTC().Format(time.RFC3339)
	arch := o.Arch
	if arch == "" {
		arch = "amd64"
	}
	return imageConfig{
		Architecture: arch,
		OS:           "linux",
		Created:      created,
		Config:       runConfig{Env: o.Env, Entrypoint: o.Entrypoint, Cmd: o.Cmd, WorkingDir: "/"},
		RootFS:       rootFS{Type: "layers", DiffIDs: []string{"sha256:" + layerHex}},
		History:      []historyItem{{Created: created, CreatedBy: "kernpool deploy/image/mkimage"}},
	}
}

func addBytes(tw *tar.Writer, name string, b []byte, mtime time.Time) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	if _, err := tw.Write(b); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	return nil
}

func addFile(tw *tar.Writer, name string, f *os.File, mtime time.Time) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat layer: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("rewind layer: %w", err)
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: st.Size(), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	if _, err := io.Copy(tw, f); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	return nil
}
