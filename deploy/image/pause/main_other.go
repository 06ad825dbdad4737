//go:build !unix

package main

import (
	"fmt"
	"os"
)

// main: a pod sandbox is a Linux thing; elsewhere the command only says so.
func main() {
	fmt.Fprintln(os.Stderr, "pause: Linux only")
	os.Exit(2)
}
