package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// tree makes a small rootfs: a file, a hard link to it, a symlink, an
// executable, and a file under dev/ that the image must leave out.
func tree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"usr/bin", "dev", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(rel, body string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(root, rel), []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("etc/hostname", "kernpool\n", 0o644)
	write("usr/bin/python3", "#!/bin/sh\n", 0o755)
	write("dev/leftover", "x", 0o644)
	if err := os.Symlink("python3", filepath.Join(root, "usr/bin/python")); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" {
		if err := os.Link(filepath.Join(root, "usr/bin/python3"), filepath.Join(root, "usr/bin/python3.11")); err != nil {
			t.Fatal(err)
		}
	}
	// Times that differ from the epoch: the image must not carry them.
	if err := os.Chtimes(filepath.Join(root, "etc/hostname"), time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	return root
}

func build(t *testing.T, o Options) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	id, err := Write(&buf, o)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), id
}

// readTar returns a tar's entries in order and the contents of its
// regular files.
func readTar(t *testing.T, b []byte) ([]*tar.Header, map[string][]byte) {
	t.Helper()
	var hdrs []*tar.Header
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hdrs, files
		}
		if err != nil {
			t.Fatal(err)
		}
		hdrs = append(hdrs, h)
		if h.Typeflag == tar.TypeReg {
			body, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = body
		}
	}
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestArchiveReproducible: one tree and epoch give the same bytes
// twice, whatever the files' own times, and the archive is one a
// docker-archive importer reads: manifest.json names the config and the
// layer by digest, the config's diff_id is the layer's digest.
func TestArchiveReproducible(t *testing.T) {
	root := tree(t)
	o := Options{Rootfs: root, Tag: "localhost/kernpool:test", Entrypoint: []string{"/usr/local/bin/kernpool"}, Cmd: []string{"serve"}, Epoch: 1700000000}
	a, id := build(t, o)
	if err := os.Chtimes(filepath.Join(root, "usr/bin/python3"), time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	b, id2 := build(t, o)
	if !bytes.Equal(a, b) || id != id2 {
		t.Fatalf("two builds of one tree differ: %s vs %s", id, id2)
	}
	_, files := readTar(t, a)
	var man []manifestEntry
	if err := json.Unmarshal(files["manifest.json"], &man); err != nil || len(man) != 1 {
		t.Fatalf("manifest.json: %v %s", err, files["manifest.json"])
	}
	m := man[0]
	if len(m.RepoTags) != 1 || m.RepoTags[0] != o.Tag || len(m.Layers) != 1 {
		t.Fatalf("manifest: %+v", m)
	}
	cfgBytes, layer := files[m.Config], files[m.Layers[0]]
	if "sha256:"+sum(cfgBytes) != id || m.Config != "blobs/sha256/"+sum(cfgBytes) || m.Layers[0] != "blobs/sha256/"+sum(layer) {
		t.Fatalf("blob names are not their digests: %+v, id %s", m, id)
	}
	var cfg imageConfig
	if err := json.Unmarshal(cfgBytes, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.RootFS.DiffIDs[0] != "sha256:"+sum(layer) || cfg.OS != "linux" || cfg.Config.Entrypoint[0] != "/usr/local/bin/kernpool" || cfg.Config.Cmd[0] != "serve" {
		t.Fatalf("config: %s", cfgBytes)
	}
}

// TestLayerEntries: the layer lists the tree in lexical order with the
// epoch as every time, keeps dev/ empty, writes a symlink as one and a
// second name of a file as a hard link.
func TestLayerEntries(t *testing.T) {
	var buf bytes.Buffer
	if err := writeLayer(&buf, tree(t), 1700000000); err != nil {
		t.Fatal(err)
	}
	hdrs, _ := readTar(t, buf.Bytes())
	var names []string
	byName := map[string]*tar.Header{}
	for _, h := range hdrs {
		names = append(names, h.Name)
		byName[h.Name] = h
		if h.ModTime.Unix() != 1700000000 || h.Uname != "" {
			t.Errorf("%s: time %v, uname %q", h.Name, h.ModTime, h.Uname)
		}
	}
	want := "dev/ etc/ etc/hostname usr/ usr/bin/ usr/bin/python usr/bin/python3"
	if runtime.GOOS != "windows" {
		want += " usr/bin/python3.11"
	}
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("entries:\n got %s\nwant %s", got, want)
	}
	if h := byName["usr/bin/python"]; h.Typeflag != tar.TypeSymlink || h.Linkname != "python3" {
		t.Fatalf("symlink: %+v", h)
	}
	if h := byName["usr/bin/python3"]; h.Mode&0o111 == 0 {
		t.Fatalf("executable lost its mode: %o", h.Mode)
	}
	if runtime.GOOS != "windows" {
		if h := byName["usr/bin/python3.11"]; h.Typeflag != tar.TypeLink || h.Linkname != "usr/bin/python3" {
			t.Fatalf("hard link: %+v", h)
		}
	}
}
