package main

import "os"

// notifyHangup does nothing: Windows has no SIGHUP (restart to reload).
func notifyHangup(chan<- os.Signal) {}
