// Command s3fake serves an in-memory S3 (github.com/johannesboyne/gofakes3,
// the store the fleet tests use) on a loopback address, as the shared
// checkpoint store of integration/k8s/run's cluster: the test cluster
// has no object store and cannot pull one.
//
//	s3fake --listen 127.0.0.1:19000 --bucket ckpt
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:19000", "address to serve on (loopback)")
	bucket := flag.String("bucket", "ckpt", "bucket to create")
	flag.Parse()
	if host, _, err := net.SplitHostPort(*listen); err != nil || !net.ParseIP(host).IsLoopback() {
		fmt.Fprintf(os.Stderr, "s3fake: %q is not a loopback address: this store has no authentication\n", *listen)
		os.Exit(2)
	}
	be := s3mem.New()
	if err := be.CreateBucket(*bucket); err != nil {
		fmt.Fprintln(os.Stderr, "s3fake:", err)
		os.Exit(1)
	}
	srv := &http.Server{
		Addr:              *listen,
		Handler:           gofakes3.New(be, gofakes3.WithLogger(gofakes3.DiscardLog())).Server(),
		ReadHeaderTimeout: 10 * time.Second,
	}
	fmt.Fprintf(os.Stderr, "s3fake: serving bucket %s on http://%s\n", *bucket, *listen)
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "s3fake:", err)
		os.Exit(1)
	}
}
