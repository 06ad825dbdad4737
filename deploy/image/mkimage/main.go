// Command mkimage writes a directory tree as a one-layer container
// image in the docker-archive format (`docker save`'s), which
// `ctr -n k8s.io images import` and `docker load` read: no registry and
// no image builder are needed, and the same tree and epoch always give
// the same bytes (entries sorted, times clamped to the epoch, owners by
// number only), so an image digest names what was built.
//
//	mkimage --rootfs DIR --tag kernpool:dev --out kernpool.tar \
//	        --entrypoint /usr/local/bin/kernpool --cmd serve --epoch 1700000000
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// listFlag collects a flag given several times.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var o Options
	var entry, cmd, env listFlag
	flag.StringVar(&o.Rootfs, "rootfs", "", "directory holding the image's root file system")
	flag.StringVar(&o.Tag, "tag", "", "image name and tag, e.g. kernpool:dev")
	out := flag.String("out", "", "archive to write")
	flag.Var(&entry, "entrypoint", "entrypoint argument (repeat for each)")
	flag.Var(&cmd, "cmd", "default command argument (repeat for each)")
	flag.Var(&env, "env", "NAME=VALUE of the image's environment (repeat)")
	flag.Int64Var(&o.Epoch, "epoch", 0, "time of every entry and of the image (SOURCE_DATE_EPOCH)")
	flag.StringVar(&o.Arch, "arch", "amd64", "image architecture")
	flag.Parse()
	o.Entrypoint, o.Cmd, o.Env = entry, cmd, env
	if o.Rootfs == "" || o.Tag == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "mkimage: --rootfs, --tag and --out are required")
		os.Exit(2)
	}
	if err := writeFile(*out, o); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

// writeFile writes the archive to a temporary file beside path and
// renames it, so an interrupted build never leaves a torn archive.
func writeFile(path string, o Options) error {
	f, err := os.CreateTemp(dirOf(path), ".mkimage-*")
	if err != nil {
		return fmt.Errorf("create archive: %w", err)
	}
	defer os.Remove(f.Name())
	digest, err := Write(f, o)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close archive: %w", cerr)
	}
	if err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("rename archive: %w", err)
	}
	fmt.Printf("%s %s %s\n", path, o.Tag, digest)
	return nil
}

func dirOf(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[:i+1]
	}
	return "."
}
