//go:build tools

// Package deps pins module requirements that helpers need before their code imports them.
// Removed once every dependency is imported by real code.
package deps
import (
 _ "github.com/containerd/cgroups/v3"
 _ "github.com/containerd/cgroups/v3/cgroup1"
 _ "github.com/containerd/cgroups/v3/cgroup2"
 _ "github.com/opencontainers/runtime-spec/specs-go"
 _ "github.com/hashicorp/go-hclog"
 _ "github.com/hashicorp/hcl/v2"
 _ "github.com/hashicorp/hcl/v2/gohcl"
 _ "github.com/hashicorp/hcl/v2/hclsimple"
 _ "go.uber.org/goleak"
 _ "golang.org/x/sys/unix"
 _ "golang.org/x/sys/windows"
)
