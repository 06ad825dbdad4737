package main

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// skipContents are the top-level directories whose contents the
// runtime provides (a fresh /proc, /sys and /dev in every container):
// the image keeps the empty directories only.
var skipContents = map[string]bool{"proc": true, "sys": true, "dev": true}

// writeLayer writes root as an uncompressed layer tar: entries in
// lexical order (parents first), every time set to epoch, owners by
// number, hard links as links to the first path of their inode.
func writeLayer(w io.Writer, root string, epoch int64) error {
	tw := tar.NewWriter(w)
	mtime := time.Unix(epoch, 0).UTC()
	seen := map[inodeKey]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walk rootfs: %w", err)
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if dir := filepath.ToSlash(filepath.Dir(rel)); skipContents[dir] {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		return addEntry(tw, path, rel, mtime, seen)
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write layer: %w", err)
	}
	return nil
}

func addEntry(tw *tar.Writer, path, rel string, mtime time.Time, seen map[inodeKey]string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("stat %s: %w", rel, err)
	}
	if fi.Mode()&(fs.ModeSocket|fs.ModeNamedPipe|fs.ModeDevice|fs.ModeCharDevice) != 0 {
		return nil // made by the runtime or at run time, never shipped
	}
	link := ""
	if fi.Mode()&fs.ModeSymlink != 0 {
		if link, err = os.Readlink(path); err != nil {
			return fmt.Errorf("readlink %s: %w", rel, err)
		}
	}
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return fmt.Errorf("header %s: %w", rel, err)
	}
	hdr.Name = rel
	if fi.IsDir() {
		hdr.Name += "/"
	}
	hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = mtime, time.Time{}, time.Time{}
	hdr.Uname, hdr.Gname = "", ""
	hdr.Uid, hdr.Gid = owner(fi)
	hdr.Format = tar.FormatPAX
	if key, ok := inodeOf(fi); ok && fi.Mode().IsRegular() {
		if first, dup := seen[key]; dup {
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
			return writeHeader(tw, hdr, rel)
		}
		seen[key] = rel
	}
	if err := writeHeader(tw, hdr, rel); err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", rel, err)
	}
	defer f.Close()
	n, err := io.Copy(tw, f)
	if err != nil {
		return fmt.Errorf("copy %s: %w", rel, err)
	}
	if n != hdr.Size {
		return fmt.Errorf("copy %s: changed while read (%d of %d bytes)", rel, n, hdr.Size)
	}
	return nil
}

func writeHeader(tw *tar.Writer, hdr *tar.Header, rel string) error {
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	return nil
}
