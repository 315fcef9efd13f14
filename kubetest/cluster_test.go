package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	nodev1 "k8s.io/api/node/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// need returns the directory named by the variable env holding the file
// bin, skipping the test when it is unset (failing under
// LAZARET_TEST_KUBE=1).
func need(t *testing.T, env, bin, how string) string {
	t.Helper()
	dir := os.Getenv(env)
	if dir == "" {
		if os.Getenv("LAZARET_TEST_KUBE") == "1" {
			t.Fatalf("%s is not set (LAZARET_TEST_KUBE=1 makes the API server validation mandatory); %s", env, how)
		}
		t.Skipf("%s is not set: the API server validation needs %s; %s", env, bin, how)
	}
	p := filepath.Join(dir, bin)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s: %v; %s", env, err, how)
	}
	return p
}

// cluster is a running etcd and kube-apiserver and clients for them.
type cluster struct {
	dir     string
	procs   []*exec.Cmd
	config  *rest.Config
	core    kubernetes.Interface
	dynamic dynamic.Interface
	crds    apiextensions.Interface
}

var (
	shared     *cluster
	sharedErr  error
	sharedOnce sync.Once
)

// startCluster starts one API server for the package's tests; it lives
// until the test binary exits (the processes die with it: they are
// started with Pdeathsig).
func startCluster(t *testing.T) *cluster {
	t.Helper()
	apiserver := need(t, "LAZARET_KUBE_BIN", "kube-apiserver", "run make kube-bin, which builds it into $(KUBE_BIN)")
	etcd := need(t, "LAZARET_KUBE_BIN", "etcd", "run make kube-bin")
	sharedOnce.Do(func() { shared, sharedErr = boot(apiserver, etcd) })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// TestMain stops the shared API server and etcd and removes their files
// after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		for _, p := range shared.procs {
			p.Process.Kill()
		}
		time.Sleep(100 * time.Millisecond)
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// logFile collects a process's output, for the error when it fails.
type logFile struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logFile) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.buf.String()
	if len(s) > 4000 {
		s = s[len(s)-4000:]
	}
	return s
}

func boot(apiserverBin, etcdBin string) (*cluster, error) {
	dir, err := os.MkdirTemp("", "lazaret-kubetest-")
	if err != nil {
		return nil, err
	}
	clientPort, err := freePort()
	if err != nil {
		return nil, err
	}
	peerPort, err := freePort()
	if err != nil {
		return nil, err
	}
	securePort, err := freePort()
	if err != nil {
		return nil, err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	etcdLog := &logFile{}
	etcdCmd := exec.Command(etcdBin, "--data-dir", filepath.Join(dir, "etcd"), "--name", "default",
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL, "--log-level", "error")
	etcdCmd.Stdout, etcdCmd.Stderr = etcdLog, etcdLog
	etcdCmd.SysProcAttr = deathSignal()
	if err := etcdCmd.Start(); err != nil {
		return nil, fmt.Errorf("starting etcd: %w", err)
	}

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err == nil {
			err = os.WriteFile(p, data, 0o600)
		}
		return p
	}
	keyFile := write("sa.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	pubFile := write("sa.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
	token := rand.Text()
	tokens := write("tokens.csv", []byte(token+`,lazaret-kubetest,lazaret-kubetest,"system:masters"`+"\n"))
	if err != nil {
		return nil, err
	}
	apiLog := &logFile{}
	api := exec.Command(apiserverBin,
		"--etcd-servers="+etcdURL,
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", securePort),
		"--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+pubFile, "--service-account-signing-key-file="+keyFile,
		"--token-auth-file="+tokens, "--anonymous-auth=false", "--authorization-mode=RBAC")
	api.Stdout, api.Stderr = apiLog, apiLog
	api.SysProcAttr = deathSignal()
	if err := api.Start(); err != nil {
		return nil, fmt.Errorf("starting kube-apiserver: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- api.Wait() }()

	cfg := &rest.Config{
		Host:            fmt.Sprintf("https://127.0.0.1:%d", securePort),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}, // its self-signed serving certificate, on loopback
		QPS:             100, Burst: 200,
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-exited:
			return false, fmt.Errorf("kube-apiserver exited: %v\n%s\netcd:\n%s", err, apiLog.tail(), etcdLog.tail())
		default:
		}
		body, err := core.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && strings.TrimSpace(string(body)) == "ok", nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for kube-apiserver: %w\n%s", err, apiLog.tail())
	}
	c := &cluster{dir: dir, procs: []*exec.Cmd{api, etcdCmd}, config: cfg, core: core}
	if c.dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.crds, err = apiextensions.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if err := c.installCRDs(ctx); err != nil {
		return nil, err
	}
	// The gVisor RuntimeClass a cluster's operator installs (its handler
	// names the runsc runtime of containerd or CRI-O).
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"}
	if _, err := core.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating RuntimeClass gvisor: %w", err)
	}
	return c, nil
}

// crdDir is the agent-sandbox release's CRD directory in the module cache.
func crdDir() (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/agent-sandbox")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating sigs.k8s.io/agent-sandbox: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "k8s", "crds"), nil
}

// installCRDs creates every CRD of the agent-sandbox release and waits
// until each is established.
func (c *cluster) installCRDs(ctx context.Context) error {
	dir, err := crdDir()
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs in %s (%v)", dir, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if _, err := c.crds.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
		err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			got, err := c.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", crd.Name, err)
		}
	}
	// Discovery of the new group lags establishment a little.
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := c.core.Discovery().ServerResourcesForGroupVersion("agents.x-k8s.io/v1beta1")
		return err == nil, nil
	})
}
