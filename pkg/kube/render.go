package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/readyprobe"
)

// Input is what the planner renders: a resolved profile reduced to plain
// values. lazaret-cli fills it from the trusted configuration and the
// workspace's repository; tests fill it by hand.
type Input struct {
	// Profile is the profile's name.
	Profile string
	// Image is the profile's OCI image reference.
	Image string
	// ImageUser is the image configuration's User ("uid[:gid]", a name,
	// or empty when unknown or root).
	ImageUser string
	// Fingerprint is the configuration fingerprint, recorded as an
	// annotation so a cluster object names the configuration it came
	// from.
	Fingerprint string
	// Policy is the profile's derived network policy and Targets its
	// readiness targets (netprofile.PolicyOf).
	Policy  *netpolicy.DerivedNetworkPolicy
	Targets netpolicy.Targets
	// Env are the profile's environment references: the sandbox variable
	// and, for messages, the host variable behind it.
	Env []EnvRef
	// PersistentDirs are the persistent sandbox directories, absolute.
	PersistentDirs []string
	// Workspace is the repository the pod's /workspace is cloned from.
	Workspace Workspace
}

// EnvRef is one env: reference of the profile.
type EnvRef struct {
	Name     string // the variable the sandbox sees
	HostName string // the host variable it comes from locally
}

// Workspace is the commit the pod's workspace is made from.
type Workspace struct {
	// URL is the remote the cluster fetches from.
	URL string
	// Commit is the full hexadecimal object name of the commit.
	Commit string
	// Branch, when not empty, is the branch checked out at Commit;
	// otherwise the commit is checked out detached.
	Branch string
}

// Options are the rendering choices of `lazaret-cli kube render`.
type Options struct {
	// Name is the Sandbox's name, which is also its pod's; empty means
	// "lazaret-<profile>".
	Name string
	// Namespace, when not empty, is set on every object.
	Namespace string
	// RuntimeClass is the pod's runtimeClassName (a gVisor class).
	RuntimeClass string
	// Secret is the Secret the env: references are read from; empty
	// means the Sandbox's name.
	Secret string
	// ProberImage runs the readiness init container (lazaret-guest
	// readiness); GitImage runs the workspace clone and needs sh and git;
	// empty means the profile's image.
	ProberImage string
	GitImage    string
	// StorageSize is the size of each claim (workspace and persistent
	// directories); StorageClass, when not empty, their class.
	StorageSize  string
	StorageClass string
	// RunAsUser, when set, overrides the image's user.
	RunAsUser *int64
	// ProbeTimeout is the readiness prober's --timeout argument.
	ProbeTimeout string
}

// Defaults of Options.
const (
	DefaultRuntimeClass = "gvisor"
	DefaultStorageSize  = "10Gi"
	DefaultProbeTimeout = "3s"
)

// Labels and annotations on every rendered object.
const (
	LabelSandbox          = "lazaret.dev/sandbox"
	LabelProfile          = "lazaret.dev/profile"
	AnnotationFingerprint = "lazaret.dev/configuration-fingerprint"
	AnnotationPolicy      = "lazaret.dev/network-policy-digest"
	AnnotationCommit      = "lazaret.dev/workspace-commit"
)

// Container and volume names in the pod.
const (
	ContainerAgent     = "agent"
	ContainerReadiness = "readiness"
	ContainerWorkspace = "workspace"
	VolumeWorkspace    = "workspace"
	WorkspacePath      = "/workspace"
)

// ErrInput is the cause of every refusal of an input or option.
var ErrInput = errors.New("cannot render")

// Plan is the rendered objects, in the order they are applied: the
// NetworkPolicy first, so the pod never runs unconfined, then the
// Sandbox.
type Plan struct {
	NetworkPolicy *NetworkPolicy
	Sandbox       *Sandbox
	// SecretKeys are the keys the Secret must hold (the sandbox variable
	// names), sorted; SecretName is its name.
	SecretName string
	SecretKeys []string
}

// Objects returns the plan's objects in apply order.
func (p *Plan) Objects() []Object { return []Object{p.NetworkPolicy, p.Sandbox} }

var (
	dns1123Label     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	envName          = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	quantity         = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$`)
	commitName       = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)
	duration         = regexp.MustCompile(`^[0-9]+(ms|s|m)$`)
	// branchName is a conservative subset of git's branch names: no
	// leading '-' (an option to git), no shell or control characters,
	// no "..", no "//", no ".lock" or "/" at the end.
	branchName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._/+-]*$`)
)

// CheckBranch reports whether name can be the checked-out branch of the
// pod's clone. The branch comes from the workspace's HEAD, which the
// sandbox can write, so anything outside a conservative subset of git's
// branch names is refused rather than passed to git in the pod.
func CheckBranch(name string) error {
	if len(name) > 200 || !branchName.MatchString(name) || strings.Contains(name, "..") ||
		strings.Contains(name, "//") || strings.HasSuffix(name, ".lock") || strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".") {
		return inputErr("workspace branch", "%q is not a plain branch name", name)
	}
	return nil
}

func inputErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInput, field, fmt.Sprintf(format, args...))
}

func checkLabel(field, v string) error {
	if len(v) > 63 || !dns1123Label.MatchString(v) {
		return inputErr(field, "%q is not a DNS label (lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63)", v)
	}
	return nil
}

func checkSubdomain(field, v string) error {
	if len(v) > 253 || !dns1123Subdomain.MatchString(v) {
		return inputErr(field, "%q is not a DNS subdomain (lowercase labels joined by '.', at most 253)", v)
	}
	return nil
}

func checkImage(field, v string) error {
	if v == "" || strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return inputErr(field, "%q is not an image reference", v)
	}
	return nil
}

// foldLabel folds s toward a DNS label: ASCII letters lowercased, digits
// kept, every other run of characters one '-', none at either end.
func foldLabel(s string) string {
	mapped := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		}
		return '-'
	}, s)
	return strings.Join(strings.FieldsFunc(mapped, func(r rune) bool { return r == '-' }), "-")
}

// hashedLabel is prefix and folded cut to fit a DNS label, followed by a
// short hash of exact.
func hashedLabel(prefix, folded, exact string) string {
	sum := sha256.Sum256([]byte(exact))
	suffix := "-" + hex.EncodeToString(sum[:4])
	name := prefix
	if folded != "" {
		name += "-" + folded
	}
	return strings.TrimRight(name[:min(len(name), 63-len(suffix))], "-") + suffix
}

// DefaultName is the Sandbox name for a profile: "lazaret-" and the
// profile's name folded to a DNS label, with a short hash of the exact
// name when folding changed it, so that two profiles never share one.
func DefaultName(profile string) string {
	folded := foldLabel(profile)
	if name := "lazaret-" + folded; folded == profile && len(name) <= 63 {
		return name
	}
	return hashedLabel("lazaret", folded, profile)
}

// ClaimName is the volumeClaimTemplate (and pod volume) name of a
// persistent directory: "persist-" and the path folded to a DNS label,
// cut to fit, with a hash of the exact path.
func ClaimName(dir string) string { return hashedLabel("persist", foldLabel(dir), dir) }

// Render plans the objects of one profile. It refuses, naming the field,
// any input it cannot render faithfully; it never reads the environment
// or the filesystem.
func Render(in Input, o Options) (*Plan, error) {
	if in.Profile == "" {
		return nil, inputErr("profile", "empty")
	}
	if err := checkImage("image", in.Image); err != nil {
		return nil, err
	}
	if in.Policy == nil {
		return nil, inputErr("network policy", "none given")
	}
	if len(in.Policy.NameRules) > 0 || len(in.Targets.Hosts) > 0 {
		return nil, inputErr("network policy", "has host names; a NetworkPolicy admits addresses only (lazaret-cli kube render --without-host-names renders the address policy alone)")
	}
	if len(in.Targets.Denied)+len(in.Targets.Permitted)+len(in.Targets.DNS) == 0 {
		return nil, inputErr("readiness", "no denied, permitted or dns target; the pod would have nothing to prove before its agent starts")
	}
	if len(in.Policy.Brokered) > 0 {
		return nil, inputErr("network policy", "brokers credentials; there is no broker in the cluster")
	}
	name := o.Name
	if name == "" {
		name = DefaultName(in.Profile)
	}
	if err := checkLabel("--name", name); err != nil {
		return nil, err
	}
	if o.Namespace != "" {
		if err := checkLabel("--namespace", o.Namespace); err != nil {
			return nil, err
		}
	}
	runtimeClass := cmpOr(o.RuntimeClass, DefaultRuntimeClass)
	if err := checkSubdomain("--runtime-class", runtimeClass); err != nil {
		return nil, err
	}
	secret := cmpOr(o.Secret, name)
	if err := checkSubdomain("--secret", secret); err != nil {
		return nil, err
	}
	if err := checkImage("--prober-image", o.ProberImage); err != nil {
		return nil, err
	}
	gitImage := cmpOr(o.GitImage, in.Image)
	if err := checkImage("--git-image", gitImage); err != nil {
		return nil, err
	}
	size := cmpOr(o.StorageSize, DefaultStorageSize)
	if !quantity.MatchString(size) {
		return nil, inputErr("--storage-size", "%q is not a storage quantity such as 10Gi", size)
	}
	if o.StorageClass != "" {
		if err := checkSubdomain("--storage-class", o.StorageClass); err != nil {
			return nil, err
		}
	}
	timeout := cmpOr(o.ProbeTimeout, DefaultProbeTimeout)
	if d, err := time.ParseDuration(timeout); !duration.MatchString(timeout) || err != nil || d <= 0 || d > readyprobe.MaxTimeout {
		return nil, inputErr("--probe-timeout", "%q is not a duration from 1ms to %v, such as 3s", timeout, readyprobe.MaxTimeout)
	}
	if in.Workspace.URL == "" {
		return nil, inputErr("workspace remote", "no URL")
	}
	if !commitName.MatchString(in.Workspace.Commit) {
		return nil, inputErr("workspace commit", "%q is not a full commit name", in.Workspace.Commit)
	}
	if strings.ContainsFunc(in.Workspace.URL, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return nil, inputErr("workspace remote", "the URL holds a control character")
	}
	if in.Workspace.Branch != "" {
		if err := CheckBranch(in.Workspace.Branch); err != nil {
			return nil, err
		}
	}

	digest, err := in.Policy.Digest()
	if err != nil {
		return nil, fmt.Errorf("rendering profile %q: %w", in.Profile, err)
	}
	egress, err := EgressRules(in.Policy)
	if err != nil {
		return nil, fmt.Errorf("rendering profile %q: %w", in.Profile, err)
	}
	labels := map[string]string{
		"app.kubernetes.io/name":       "lazaret",
		"app.kubernetes.io/managed-by": "lazaret-cli",
		LabelSandbox:                   name,
		LabelProfile:                   DefaultName(in.Profile)[len("lazaret-"):],
	}
	annotations := map[string]string{
		AnnotationPolicy: digest.String(),
		AnnotationCommit: in.Workspace.Commit,
	}
	if in.Fingerprint != "" {
		annotations[AnnotationFingerprint] = in.Fingerprint
	}
	meta := func(n string) ObjectMeta {
		return ObjectMeta{Name: n, Namespace: o.Namespace, Labels: labels, Annotations: annotations}
	}

	plan := &Plan{SecretName: secret}
	plan.NetworkPolicy = &NetworkPolicy{
		TypeMeta: TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		Metadata: meta(name),
		Spec: NetworkPolicySpec{
			PodSelector: LabelSelector{MatchLabels: map[string]string{LabelSandbox: name}},
			PolicyTypes: []string{"Ingress", "Egress"},
			Ingress:     []IngressRule{},
			Egress:      egress,
		},
	}
	if plan.NetworkPolicy.Spec.Egress == nil {
		plan.NetworkPolicy.Spec.Egress = []EgressRule{}
	}

	pod, err := podSpec(in, o, runtimeClass, secret, gitImage, timeout)
	if err != nil {
		return nil, err
	}
	for _, e := range in.Env {
		plan.SecretKeys = append(plan.SecretKeys, e.Name)
	}
	slices.Sort(plan.SecretKeys)

	claims := []PersistentVolumeClaimTemplate{claim(VolumeWorkspace, size, o.StorageClass)}
	for _, d := range in.PersistentDirs {
		claims = append(claims, claim(ClaimName(d), size, o.StorageClass))
	}
	plan.Sandbox = &Sandbox{
		TypeMeta: TypeMeta{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox"},
		Metadata: meta(name),
		Spec: SandboxSpec{
			PodTemplate:          PodTemplate{Metadata: PodMetadata{Labels: labels, Annotations: annotations}, Spec: *pod},
			VolumeClaimTemplates: claims,
			OperatingMode:        "Running",
		},
	}
	return plan, nil
}

func claim(name, size, class string) PersistentVolumeClaimTemplate {
	c := PersistentVolumeClaimTemplate{
		Metadata: EmbeddedMetadata{Name: name},
		Spec: PersistentVolumeClaimSpec{
			AccessModes: []string{"ReadWriteOnce"},
			Resources:   VolumeResourceNeeds{Requests: map[string]string{"storage": size}},
		},
	}
	if class != "" {
		c.Spec.StorageClassName = &class
	}
	return c
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// imageIdentity parses an image's User into a numeric uid and gid; ok is
// false for a name, which a pod's securityContext cannot express.
func imageIdentity(user string) (uid, gid int64, hasGID, ok bool) {
	u, g, hasGID := strings.Cut(user, ":")
	uid, err := strconv.ParseInt(u, 10, 64)
	if err != nil || uid < 0 || uid > 1<<31-1 {
		return 0, 0, false, false
	}
	if hasGID {
		gid, err = strconv.ParseInt(g, 10, 64)
		if err != nil || gid < 0 || gid > 1<<31-1 {
			return 0, 0, false, false
		}
	}
	return uid, gid, hasGID, true
}

// podSpec is the Sandbox's pod: gVisor, no service account token, no
// service links, DNS to the profile's resolvers only, the readiness proof
// and the workspace clone as init containers, the agent last.
func podSpec(in Input, o Options, runtimeClass, secret, gitImage, timeout string) (*PodSpec, error) {
	sc := &PodSecurityContext{SeccompProfile: &SeccompProfile{Type: "RuntimeDefault"}}
	switch {
	case o.RunAsUser != nil:
		if *o.RunAsUser < 0 || *o.RunAsUser > 1<<31-1 {
			return nil, inputErr("--run-as-user", "%d is not a uid", *o.RunAsUser)
		}
		sc.RunAsUser = ptr(*o.RunAsUser)
		sc.RunAsNonRoot = ptr(*o.RunAsUser != 0)
		sc.FSGroup = ptr(*o.RunAsUser)
	case in.ImageUser != "":
		uid, gid, hasGID, ok := imageIdentity(in.ImageUser)
		if !ok {
			return nil, inputErr("image user", "%q is a name; a pod can only run as a numeric uid (give --run-as-user UID)", in.ImageUser)
		}
		if uid != 0 {
			sc.RunAsUser, sc.RunAsNonRoot = ptr(uid), ptr(true)
			sc.FSGroup = ptr(uid)
			if hasGID {
				sc.RunAsGroup, sc.FSGroup = ptr(gid), ptr(gid)
			}
		}
	}

	var nameservers []string
	for _, r := range in.Policy.Resolvers {
		nameservers = append(nameservers, r.Address.String())
	}
	if len(nameservers) > 3 {
		return nil, inputErr("readiness.dns", "%d resolvers; a pod takes at most 3 nameservers", len(nameservers))
	}
	if len(nameservers) == 0 {
		// No resolver: DNS goes to the pod's own loopback, where nothing
		// answers, as no DNS leaves the local sandbox either.
		nameservers = []string{"127.0.0.1"}
	}

	var env []EnvVar
	for _, e := range in.Env {
		if !envName.MatchString(e.Name) {
			return nil, inputErr("env", "%q is not a variable name", e.Name)
		}
		env = append(env, EnvVar{Name: e.Name, ValueFrom: &EnvVarSource{SecretKeyRef: &SecretKeySelector{Name: secret, Key: e.Name}}})
	}
	gitEnv := []EnvVar{
		{Name: "GIT_CONFIG_COUNT", Value: "1"},
		{Name: "GIT_CONFIG_KEY_0", Value: "safe.directory"},
		{Name: "GIT_CONFIG_VALUE_0", Value: WorkspacePath},
	}
	mounts := []VolumeMount{{Name: VolumeWorkspace, MountPath: WorkspacePath}}
	for _, d := range in.PersistentDirs {
		if !strings.HasPrefix(d, "/") || d == WorkspacePath || strings.HasPrefix(d, WorkspacePath+"/") {
			return nil, inputErr("persistent_dirs", "%q cannot be a claim's mount point", d)
		}
		mounts = append(mounts, VolumeMount{Name: ClaimName(d), MountPath: d})
	}

	locked := func() *ContainerSecurityContext {
		return &ContainerSecurityContext{
			AllowPrivilegeEscalation: ptr(false),
			Privileged:               ptr(false),
			Capabilities:             &Capabilities{Drop: []string{"ALL"}},
		}
	}
	prober := Container{
		Name:                     ContainerReadiness,
		Image:                    o.ProberImage,
		Command:                  []string{"/lazaret-guest", "readiness"},
		Args:                     ProbeArgs(in.Targets, timeout),
		TerminationMessagePolicy: "FallbackToLogsOnError",
		SecurityContext:          locked(),
	}
	prober.SecurityContext.ReadOnlyRootFilesystem = ptr(true)
	prober.SecurityContext.RunAsUser = ptr(int64(65534))
	prober.SecurityContext.RunAsGroup = ptr(int64(65534))
	prober.SecurityContext.RunAsNonRoot = ptr(true)

	ws := in.Workspace
	clone := Container{
		Name:    ContainerWorkspace,
		Image:   gitImage,
		Command: []string{"/bin/sh", "-c", CloneScript},
		Env: append([]EnvVar{
			{Name: "LAZARET_WORKSPACE", Value: WorkspacePath},
			{Name: "LAZARET_GIT_URL", Value: ws.URL},
			{Name: "LAZARET_GIT_COMMIT", Value: ws.Commit},
			{Name: "LAZARET_GIT_BRANCH", Value: ws.Branch},
		}, gitEnv...),
		VolumeMounts:             []VolumeMount{{Name: VolumeWorkspace, MountPath: WorkspacePath}},
		TerminationMessagePolicy: "FallbackToLogsOnError",
		SecurityContext:          locked(),
	}
	agent := Container{
		Name:            ContainerAgent,
		Image:           in.Image,
		WorkingDir:      WorkspacePath,
		Env:             append(env, gitEnv...),
		VolumeMounts:    mounts,
		SecurityContext: locked(),
		Stdin:           true,
		TTY:             true,
	}
	return &PodSpec{
		RuntimeClassName:             runtimeClass,
		AutomountServiceAccountToken: ptr(false),
		EnableServiceLinks:           ptr(false),
		DNSPolicy:                    "None",
		DNSConfig:                    &PodDNSConfig{Nameservers: nameservers},
		SecurityContext:              sc,
		InitContainers:               []Container{prober, clone},
		Containers:                   []Container{agent},
	}, nil
}

// ProbeArgs are the readiness prober's arguments for targets: every denied,
// permitted and DNS target, then the timeout.
func ProbeArgs(t netpolicy.Targets, timeout string) []string {
	var args []string
	for _, d := range t.Denied {
		args = append(args, "--denied", d.String())
	}
	for _, p := range t.Permitted {
		args = append(args, "--permitted", p.String())
	}
	for _, d := range t.DNS {
		args = append(args, "--dns", d.Resolver.String()+"="+d.Query)
	}
	return append(args, "--timeout", timeout)
}
