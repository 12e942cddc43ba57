package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// fakeService holds blocks by id and answers GetBlock with a team's
// scope as the service does: another team's block is not found, and the
// scope "" (an admin's) sees every block.
type fakeService struct {
	blocks map[string]core.Block
	nodes  []string
	err    error
}

// Workloads is a viewer of team, as the service's; a team named
// "disabled" is refused as a disabled one.
func (s *fakeService) Workloads(_ context.Context, team string) (core.Principal, error) {
	if team == "disabled" {
		return core.Principal{}, fmt.Errorf("%w: team disabled was disabled", core.ErrUnauthenticated)
	}
	return core.Principal{User: core.User{ID: "workloads:" + team, Team: team, Role: core.RoleViewer}}, nil
}

// GetBlock answers as the service does for the context's principal, which
// must be the team's workloads.
func (s *fakeService) GetBlock(ctx context.Context, team, id string) (core.Block, error) {
	if s.err != nil {
		return core.Block{}, s.err
	}
	if p, ok := contract.PrincipalOf(ctx); !ok || p.User.Team != team {
		return core.Block{}, fmt.Errorf("%w: GetBlock of team %s called as %+v", core.ErrForbidden, team, p)
	}
	b, ok := s.blocks[id]
	if !ok || (team != "" && b.Team != team) {
		return core.Block{}, fmt.Errorf("%w: block %s", core.ErrNotFound, id)
	}
	return b, nil
}

func (s *fakeService) Sells(node string) bool { return slices.Contains(s.nodes, node) }

// fakeNamespaces are namespaces' labels by name.
type fakeNamespaces map[string]map[string]string

func (n fakeNamespaces) Labels(_ context.Context, name string) (map[string]string, error) {
	if name == "broken" {
		return nil, errors.New("connection refused")
	}
	return n[name], nil
}

// podBuilder makes the pods of the tests: makePod("p", "ns").Block("cb-a").Obj().
type podBuilder struct{ pod corev1.Pod }

func makePod(name, namespace string) *podBuilder {
	return &podBuilder{pod: corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app": "train"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "trainer"}}},
	}}
}

func (b *podBuilder) Block(id string) *podBuilder {
	b.pod.Labels["capblock.io/block"] = id
	return b
}

func (b *podBuilder) Tolerate(t corev1.Toleration) *podBuilder {
	b.pod.Spec.Tolerations = append(b.pod.Spec.Tolerations, t)
	return b
}

func (b *podBuilder) NodeName(n string) *podBuilder {
	b.pod.Spec.NodeName = n
	return b
}

func (b *podBuilder) NodeSelector(key, value string) *podBuilder {
	b.pod.Spec.NodeSelector = map[string]string{key: value}
	return b
}

func (b *podBuilder) Finalizer(f string) *podBuilder {
	b.pod.Finalizers = append(b.pod.Finalizers, f)
	return b
}

// Terms sets the required node affinity's terms.
func (b *podBuilder) Terms(terms ...corev1.NodeSelectorTerm) *podBuilder {
	b.pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	return b
}

func (b *podBuilder) Obj() *corev1.Pod { return b.pod.DeepCopy() }

func term(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: reqs}
}

func exists(key string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpExists}
}

func in(key string, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

var (
	soldKey      = corev1.Toleration{Key: "capblock.io/sold", Operator: corev1.TolerationOpExists}
	soldTaint    = corev1.Toleration{Key: "capblock.io/sold", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	soldEqual    = corev1.Toleration{Key: "capblock.io/sold", Operator: corev1.TolerationOpEqual, Value: "true"}
	soldFalse    = corev1.Toleration{Key: "capblock.io/sold", Operator: corev1.TolerationOpEqual, Value: "false"}
	soldExecute  = corev1.Toleration{Key: "capblock.io/sold", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}
	soldGt       = corev1.Toleration{Key: "capblock.io/sold", Operator: corev1.TolerationOpGt, Value: "0"}
	wildcard     = corev1.Toleration{Operator: corev1.TolerationOpExists}
	wildSchedule = corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	otherTaint   = corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}
)

// blockOf is a block of team in state.
func blockOf(id, team string, state core.BlockState) core.Block {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	return core.Block{ID: id, Team: team, State: state, Start: t0, End: t0.Add(4 * time.Hour), Placements: []core.Placement{{Node: "gpu-0"}}}
}

// request is one review's request.
type request struct {
	op       admissionv1.Operation
	pod, old *corev1.Pod
	resource metav1.GroupVersionResource
	sub      string
}

func create(pod *corev1.Pod) request { return request{op: admissionv1.Create, pod: pod} }

func update(old, pod *corev1.Pod) request {
	return request{op: admissionv1.Update, old: old, pod: pod}
}

// post sends req to h's path as the API server does and returns the
// HTTP status and the review's response.
func post(t testing.TB, h http.Handler, path string, req request) (int, *admissionv1.AdmissionResponse) {
	t.Helper()
	ar := &admissionv1.AdmissionRequest{UID: "uid-1", Operation: req.op, Resource: req.resource, SubResource: req.sub}
	if ar.Resource == (metav1.GroupVersionResource{}) {
		ar.Resource = podResource
	}
	if req.pod != nil {
		ar.Namespace, ar.Name = req.pod.Namespace, req.pod.Name
		ar.Object = runtime.RawExtension{Raw: mustJSON(t, req.pod)}
	}
	if req.old != nil {
		ar.OldObject = runtime.RawExtension{Raw: mustJSON(t, req.old)}
	}
	review := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: ar}
	code, body := postRaw(t, h, path, "application/json", mustJSON(t, review))
	if code != http.StatusOK {
		return code, nil
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("the answer is not a review: %v: %s", err, body)
	}
	if out.Response == nil || out.Response.UID != "uid-1" || out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" {
		t.Fatalf("the answer does not answer the review: %s", body)
	}
	return code, out.Response
}

func postRaw(t testing.TB, h http.Handler, path, contentType string, body []byte) (int, []byte) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.Bytes()
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// applyPatch applies a response's JSON patch to pod. The handler writes
// only "add" operations on members of /spec, which replace the member.
func applyPatch(t *testing.T, pod *corev1.Pod, resp *admissionv1.AdmissionResponse) *corev1.Pod {
	t.Helper()
	if resp.Patch == nil {
		return pod
	}
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("patch type %v, want JSONPatch", resp.PatchType)
	}
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		t.Fatalf("the patch is not JSON patch: %v", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(mustJSON(t, pod), &doc); err != nil {
		t.Fatal(err)
	}
	spec := doc["spec"].(map[string]any)
	for _, op := range ops {
		if op.Op != "add" || (op.Path != "/spec/tolerations" && op.Path != "/spec/affinity") {
			t.Fatalf("unexpected patch operation %s %s", op.Op, op.Path)
		}
		var v any
		if err := json.Unmarshal(op.Value, &v); err != nil {
			t.Fatal(err)
		}
		spec[op.Path[len("/spec/"):]] = v
	}
	var out corev1.Pod
	if err := json.Unmarshal(mustJSON(t, doc), &out); err != nil {
		t.Fatal(err)
	}
	return &out
}
