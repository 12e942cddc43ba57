package admission_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"capblock/internal/admission"
	"capblock/internal/backend/kubernetes"
)

// deployDir is deploy/kubernetes, from this package's directory.
const deployDir = "../../deploy/kubernetes"

// manifests are the objects of deploy/kubernetes, each file's in order.
type manifests struct {
	files map[string][]runtime.Object

	namespace   *corev1.Namespace
	account     *corev1.ServiceAccount
	role        *rbacv1.ClusterRole
	binding     *rbacv1.ClusterRoleBinding
	deployment  *appsv1.Deployment
	service     *corev1.Service
	mutating    *admissionregistrationv1.MutatingWebhookConfiguration
	validating  *admissionregistrationv1.ValidatingWebhookConfiguration
	kustomized  []string
	objectCount int
}

// loadManifests decodes every YAML file of deploy/kubernetes strictly (an
// unknown or misspelt field fails) into the API's types, and the
// kustomization's list of resources.
func loadManifests(t testing.TB) *manifests {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(deployDir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no YAML in %s (%v)", deployDir, err)
	}
	decoder := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	m := &manifests{files: map[string][]runtime.Object{}}
	for _, path := range paths {
		name := filepath.Base(path)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if name == "kustomization.yaml" {
			var k struct {
				Resources []string `json:"resources"`
			}
			if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(&k); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			m.kustomized = k.Resources
			continue
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			obj, _, err := decoder.Decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			m.files[name] = append(m.files[name], obj)
			m.objectCount++
			m.keep(t, name, obj)
		}
	}
	return m
}

// keep files obj under its kind; each kind is in the directory once.
func (m *manifests) keep(t testing.TB, file string, obj runtime.Object) {
	t.Helper()
	once := func(set bool) {
		if set {
			t.Fatalf("%s: a second %T in deploy/kubernetes", file, obj)
		}
	}
	switch o := obj.(type) {
	case *corev1.Namespace:
		once(m.namespace != nil)
		m.namespace = o
	case *corev1.ServiceAccount:
		once(m.account != nil)
		m.account = o
	case *rbacv1.ClusterRole:
		once(m.role != nil)
		m.role = o
	case *rbacv1.ClusterRoleBinding:
		once(m.binding != nil)
		m.binding = o
	case *appsv1.Deployment:
		once(m.deployment != nil)
		m.deployment = o
	case *corev1.Service:
		once(m.service != nil)
		m.service = o
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		once(m.mutating != nil)
		m.mutating = o
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		once(m.validating != nil)
		m.validating = o
	}
}

func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(append(out, line...), '\n')
		}
	}
	return out
}

// TestDeployManifests: deploy/kubernetes holds what capblock needs, and
// its parts agree with each other and with the code: the ClusterRole's
// rules are the backend's and admission's and nothing more, the webhooks
// exempt what serve exempts by default and reach the Service, and the
// kustomization applies every file.
func TestDeployManifests(t *testing.T) {
	m := loadManifests(t)
	for what, missing := range map[string]bool{
		"Namespace": m.namespace == nil, "ServiceAccount": m.account == nil, "ClusterRole": m.role == nil,
		"ClusterRoleBinding": m.binding == nil, "Deployment": m.deployment == nil, "Service": m.service == nil,
		"MutatingWebhookConfiguration": m.mutating == nil, "ValidatingWebhookConfiguration": m.validating == nil,
	} {
		if missing {
			t.Fatalf("deploy/kubernetes has no %s", what)
		}
	}

	// 1. The rights: exactly the code's.
	want := append(kubernetes.PolicyRules(), admission.PolicyRules()...)
	if diff := cmp.Diff(want, m.role.Rules); diff != "" {
		t.Errorf("clusterrole.yaml's rules (-code +yaml): update the YAML with the code\n%s", diff)
	}
	if m.binding.RoleRef.Name != m.role.Name || m.binding.RoleRef.Kind != "ClusterRole" ||
		!cmp.Equal(m.binding.Subjects, []rbacv1.Subject{{Kind: "ServiceAccount", Name: m.account.Name, Namespace: m.account.Namespace}}) {
		t.Errorf("the binding gives %+v to %+v; want the ClusterRole to the ServiceAccount %s/%s only", m.binding.RoleRef, m.binding.Subjects, m.account.Namespace, m.account.Name)
	}

	// 2. One namespace, exempt from admission, holds capblock.
	ns := m.namespace.Name
	if !slices.Contains(admission.DefaultExempt, ns) {
		t.Errorf("capblock's namespace %s is not among the default exempt namespaces %v", ns, admission.DefaultExempt)
	}
	for _, o := range []interface{ GetNamespace() string }{m.account, m.deployment, m.service} {
		if o.GetNamespace() != ns {
			t.Errorf("%T is in namespace %q, not %s", o, o.GetNamespace(), ns)
		}
	}
	pod := m.deployment.Spec.Template.Spec
	if pod.ServiceAccountName != m.account.Name || *m.deployment.Spec.Replicas < 2 {
		t.Errorf("the Deployment runs %d replicas as %q; want at least 2 as %s", *m.deployment.Spec.Replicas, pod.ServiceAccountName, m.account.Name)
	}

	// 3. The webhooks: fail closed, no side effects, the exempt
	// namespaces, the Service's admission port.
	type hook struct {
		name, path string
		policy     *admissionregistrationv1.FailurePolicyType
		effects    *admissionregistrationv1.SideEffectClass
		cc         admissionregistrationv1.WebhookClientConfig
		ns         []string
	}
	var hooks []hook
	for _, w := range m.mutating.Webhooks {
		hooks = append(hooks, hook{w.Name, admission.MutatePath, w.FailurePolicy, w.SideEffects, w.ClientConfig, notIn(w.NamespaceSelector.MatchExpressions)})
	}
	for _, w := range m.validating.Webhooks {
		hooks = append(hooks, hook{w.Name, admission.ValidatePath, w.FailurePolicy, w.SideEffects, w.ClientConfig, notIn(w.NamespaceSelector.MatchExpressions)})
	}
	for _, h := range hooks {
		if h.policy == nil || *h.policy != admissionregistrationv1.Fail || h.effects == nil || *h.effects != admissionregistrationv1.SideEffectClassNone {
			t.Errorf("webhook %s: failurePolicy %v, sideEffects %v; want Fail and None", h.name, h.policy, h.effects)
		}
		if diff := cmp.Diff(sorted(admission.DefaultExempt), sorted(h.ns)); diff != "" {
			t.Errorf("webhook %s: the namespaces it leaves out (-serve's default +yaml):\n%s", h.name, diff)
		}
		s := h.cc.Service
		if s == nil || s.Name != m.service.Name || s.Namespace != ns || s.Path == nil || *s.Path != h.path || s.Port == nil || servicePort(m.service, *s.Port) != "admission" {
			t.Errorf("webhook %s calls %+v; want the Service's admission port, path %s", h.name, s, h.path)
		}
	}

	// 4. The Service's ports are the container's.
	for _, p := range m.service.Spec.Ports {
		if !slices.ContainsFunc(pod.Containers[0].Ports, func(c corev1.ContainerPort) bool { return c.Name == p.TargetPort.StrVal }) {
			t.Errorf("the Service's port %s targets %q, which the container does not name", p.Name, p.TargetPort.StrVal)
		}
	}

	// 5. The kustomization applies every file.
	var files []string
	for f := range m.files {
		files = append(files, f)
	}
	if diff := cmp.Diff(sorted(files), sorted(m.kustomized)); diff != "" {
		t.Errorf("kustomization.yaml's resources (-files +listed):\n%s", diff)
	}
}

// notIn returns the namespaces that a namespaceSelector leaves out by
// name.
func notIn(exprs []metav1.LabelSelectorRequirement) []string {
	var out []string
	for _, e := range exprs {
		if e.Key == corev1.LabelMetadataName && e.Operator == "NotIn" {
			out = append(out, e.Values...)
		}
	}
	return out
}

// servicePort is the name of the port that s serves on port.
func servicePort(s *corev1.Service, port int32) string {
	for _, p := range s.Spec.Ports {
		if p.Port == port {
			return p.Name
		}
	}
	return ""
}

func sorted(xs []string) []string {
	out := slices.Clone(xs)
	sort.Strings(out)
	return out
}

// TestDockerfile: the image is static, built from this module's main
// package, and runs as a user that is not root.
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for _, want := range []string{"FROM golang:1.26", "CGO_ENABLED=0", "./cmd/capblock", "USER 65532:65532", `ENTRYPOINT ["/capblock"]`} {
		if !strings.Contains(s, want) {
			t.Errorf("the Dockerfile lacks %q", want)
		}
	}
}
