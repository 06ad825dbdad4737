// Package units parses the sizes operators and clients write ("64MiB",
// "1GB", "1048576"): one definition shared by the config file, the
// command line and the API's limits.
package units
