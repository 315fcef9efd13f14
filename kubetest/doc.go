// Package kubetest validates what `lazaret-cli kube render` writes against
// a real Kubernetes API server: kube-apiserver and etcd, built from the
// pinned module lazaret.dev/kubetest/apiserver (`make kube-bin`), started
// by the tests on loopback, with the agent-sandbox CRDs of the pinned
// sigs.k8s.io/agent-sandbox release installed. Rendered objects are
// decoded strictly into the upstream Go types, created with server-side
// strict field validation and read back; the pod and claims the Sandbox
// controller would make from them are created as server-side dry runs, so
// the API server's own Pod and PersistentVolumeClaim validation judges
// them too.
//
// It is its own module, outside go.work, so that the Kubernetes client
// libraries never enter the graph of a Lazaret binary.
//
// Environment:
//
//	LAZARET_KUBE_BIN   directory holding kube-apiserver and etcd
//	LAZARET_E2E_BIN    directory holding lazaret-cli
//	LAZARET_TEST_KUBE  1: a missing binary fails instead of skipping
package kubetest
