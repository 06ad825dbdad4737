// Command kernpool-init is the kernel init step as a small binary of its
// own: the same code the kernpool binary runs when it re-executes itself
// (package kinit), without the daemon's dependencies, whose package
// initialisation would add milliseconds to every kernel's cold start.
// Install it beside kernpool; the daemon uses it when it finds it there
// (docs/design.md, "The sandbox"). It is not meant to be run by hand.
package main

import (
	"fmt"
	"os"

	"github.com/kernpool/kernpool/isolate/kinit"
)

func main() {
	kinit.Main()
	fmt.Fprintln(os.Stderr, "kernpool-init: started by the kernpool daemon only (it is each kernel's init)")
	os.Exit(2)
}
