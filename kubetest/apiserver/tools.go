//go:build tools

// Package apiserver pins the Kubernetes API server and etcd that the
// validation suite of lazaret.dev/kubetest starts: `make kube-bin` builds
// both from this module, so their versions are the go.mod's and their
// sources come through the Go module proxy like every other dependency.
// k8s.io/kubernetes is built with its staging modules replaced by their
// published releases of the same version.
package apiserver

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
