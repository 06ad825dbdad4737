// Package deploy holds what runs kernpool outside one host: the
// container images (deploy/image: a script and the Go programs it
// builds) and the Kubernetes manifests (deploy/kubernetes). Its tests
// check the manifests against what the daemon really does, without a
// cluster: docs/kubernetes.md.
package deploy
