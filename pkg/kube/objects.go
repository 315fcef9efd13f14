package kube

// The Kubernetes objects the planner renders, as the subset of their API
// fields that Lazaret sets. Field names and JSON tags follow the
// Kubernetes API (core/v1, networking/v1) and the agent-sandbox CRD
// (agents.x-k8s.io/v1beta1) exactly; the validation suite decodes the
// rendered JSON into the upstream types with unknown fields refused and
// creates the objects on a real API server, so a misspelt field fails
// there. The structs are declared here rather than imported so that
// lazaret-cli does not link the Kubernetes API machinery for a planner
// that only writes documents.

// Object is one rendered Kubernetes object.
type Object interface {
	// Kind is the object's kind, for messages.
	GetKind() string
	// GetName is the object's name.
	GetName() string
}

// TypeMeta names an object's API version and kind.
type TypeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// GetKind returns the kind.
func (t TypeMeta) GetKind() string { return t.Kind }

// ObjectMeta is the metadata Lazaret sets on an object.
type ObjectMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Sandbox is an agents.x-k8s.io/v1beta1 Sandbox.
type Sandbox struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta  `json:"metadata"`
	Spec     SandboxSpec `json:"spec"`
}

// GetName returns the Sandbox's name.
func (s *Sandbox) GetName() string { return s.Metadata.Name }

// SandboxSpec is the Sandbox's desired state.
type SandboxSpec struct {
	PodTemplate          PodTemplate                     `json:"podTemplate"`
	VolumeClaimTemplates []PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`
	OperatingMode        string                          `json:"operatingMode,omitempty"`
}

// PodTemplate is the Sandbox's pod: labels and annotations, and the spec.
type PodTemplate struct {
	Metadata PodMetadata `json:"metadata"`
	Spec     PodSpec     `json:"spec"`
}

// PodMetadata is the pod metadata a Sandbox carries to its pod.
type PodMetadata struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PersistentVolumeClaimTemplate is one claim the Sandbox controller makes
// as "<name>-<sandbox name>" and mounts as the pod volume "<name>".
type PersistentVolumeClaimTemplate struct {
	Metadata EmbeddedMetadata          `json:"metadata"`
	Spec     PersistentVolumeClaimSpec `json:"spec"`
}

// EmbeddedMetadata names a claim template.
type EmbeddedMetadata struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

// PersistentVolumeClaimSpec is a claim's access modes, size and class.
type PersistentVolumeClaimSpec struct {
	AccessModes      []string            `json:"accessModes"`
	Resources        VolumeResourceNeeds `json:"resources"`
	StorageClassName *string             `json:"storageClassName,omitempty"`
}

// VolumeResourceNeeds holds a claim's requested storage.
type VolumeResourceNeeds struct {
	Requests map[string]string `json:"requests"`
}

// PodSpec is the subset of core/v1 PodSpec that Lazaret sets.
type PodSpec struct {
	RuntimeClassName             string              `json:"runtimeClassName"`
	AutomountServiceAccountToken *bool               `json:"automountServiceAccountToken"`
	EnableServiceLinks           *bool               `json:"enableServiceLinks"`
	HostNetwork                  bool                `json:"hostNetwork"`
	HostPID                      bool                `json:"hostPID"`
	HostIPC                      bool                `json:"hostIPC"`
	DNSPolicy                    string              `json:"dnsPolicy"`
	DNSConfig                    *PodDNSConfig       `json:"dnsConfig,omitempty"`
	SecurityContext              *PodSecurityContext `json:"securityContext,omitempty"`
	InitContainers               []Container         `json:"initContainers,omitempty"`
	Containers                   []Container         `json:"containers"`
	Volumes                      []Volume            `json:"volumes,omitempty"`
}

// PodDNSConfig sets the pod's resolvers.
type PodDNSConfig struct {
	Nameservers []string `json:"nameservers"`
}

// PodSecurityContext is the pod-wide security settings.
type PodSecurityContext struct {
	RunAsUser      *int64          `json:"runAsUser,omitempty"`
	RunAsGroup     *int64          `json:"runAsGroup,omitempty"`
	RunAsNonRoot   *bool           `json:"runAsNonRoot,omitempty"`
	FSGroup        *int64          `json:"fsGroup,omitempty"`
	SeccompProfile *SeccompProfile `json:"seccompProfile,omitempty"`
}

// SeccompProfile selects a seccomp profile.
type SeccompProfile struct {
	Type string `json:"type"`
}

// Container is the subset of core/v1 Container that Lazaret sets.
type Container struct {
	Name                     string                    `json:"name"`
	Image                    string                    `json:"image"`
	Command                  []string                  `json:"command,omitempty"`
	Args                     []string                  `json:"args,omitempty"`
	WorkingDir               string                    `json:"workingDir,omitempty"`
	Env                      []EnvVar                  `json:"env,omitempty"`
	VolumeMounts             []VolumeMount             `json:"volumeMounts,omitempty"`
	TerminationMessagePolicy string                    `json:"terminationMessagePolicy,omitempty"`
	SecurityContext          *ContainerSecurityContext `json:"securityContext,omitempty"`
	Stdin                    bool                      `json:"stdin,omitempty"`
	TTY                      bool                      `json:"tty,omitempty"`
}

// EnvVar is one container variable, here always from a Secret's key.
type EnvVar struct {
	Name      string        `json:"name"`
	Value     string        `json:"value,omitempty"`
	ValueFrom *EnvVarSource `json:"valueFrom,omitempty"`
}

// EnvVarSource names where a variable's value comes from.
type EnvVarSource struct {
	SecretKeyRef *SecretKeySelector `json:"secretKeyRef"`
}

// SecretKeySelector is one key of a Secret.
type SecretKeySelector struct {
	Name     string `json:"name"`
	Key      string `json:"key"`
	Optional *bool  `json:"optional,omitempty"`
}

// VolumeMount mounts a pod volume into a container.
type VolumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
}

// ContainerSecurityContext is the per-container security settings.
type ContainerSecurityContext struct {
	AllowPrivilegeEscalation *bool         `json:"allowPrivilegeEscalation"`
	Privileged               *bool         `json:"privileged"`
	ReadOnlyRootFilesystem   *bool         `json:"readOnlyRootFilesystem,omitempty"`
	RunAsUser                *int64        `json:"runAsUser,omitempty"`
	RunAsGroup               *int64        `json:"runAsGroup,omitempty"`
	RunAsNonRoot             *bool         `json:"runAsNonRoot,omitempty"`
	Capabilities             *Capabilities `json:"capabilities"`
}

// Capabilities adds and drops Linux capabilities.
type Capabilities struct {
	Drop []string `json:"drop"`
}

// Volume is a pod volume; Lazaret declares only emptyDir ones (claims come
// from the Sandbox's volumeClaimTemplates).
type Volume struct {
	Name     string          `json:"name"`
	EmptyDir *EmptyDirSource `json:"emptyDir"`
}

// EmptyDirSource is an empty directory for the pod's lifetime.
type EmptyDirSource struct {
	SizeLimit string `json:"sizeLimit,omitempty"`
}

// NetworkPolicy is a networking.k8s.io/v1 NetworkPolicy.
type NetworkPolicy struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta        `json:"metadata"`
	Spec     NetworkPolicySpec `json:"spec"`
}

// GetName returns the policy's name.
func (n *NetworkPolicy) GetName() string { return n.Metadata.Name }

// NetworkPolicySpec selects pods and lists what they may send and receive.
// Ingress is always present and empty: nothing may connect to the pod.
type NetworkPolicySpec struct {
	PodSelector LabelSelector `json:"podSelector"`
	PolicyTypes []string      `json:"policyTypes"`
	Ingress     []IngressRule `json:"ingress"`
	Egress      []EgressRule  `json:"egress"`
}

// LabelSelector matches pods by exact labels.
type LabelSelector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

// IngressRule is never rendered with content (no ingress is admitted); it
// exists so that the policy's empty ingress list has a type.
type IngressRule struct{}

// EgressRule admits traffic to any of its peers on any of its ports.
type EgressRule struct {
	Ports []NetworkPolicyPort `json:"ports"`
	To    []NetworkPolicyPeer `json:"to"`
}

// NetworkPolicyPort is a protocol and a port range [Port, EndPort].
type NetworkPolicyPort struct {
	Protocol string `json:"protocol"`
	Port     int32  `json:"port"`
	EndPort  *int32 `json:"endPort,omitempty"`
}

// NetworkPolicyPeer is here always an address block.
type NetworkPolicyPeer struct {
	IPBlock *IPBlock `json:"ipBlock"`
}

// IPBlock admits CIDR except the listed sub-blocks.
type IPBlock struct {
	CIDR   string   `json:"cidr"`
	Except []string `json:"except,omitempty"`
}
