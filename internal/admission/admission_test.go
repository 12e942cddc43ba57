package admission

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"capblock/internal/core"
)

const blockKey = "block.capblock.io/cb-a"

func testBlocks() map[string]core.Block {
	term := blockOf("cb-a-term", "team-a", core.StateActive)
	term.Terminating = true
	return map[string]core.Block{
		"cb-a":         blockOf("cb-a", "team-a", core.StateActive),
		"cb-a-next":    blockOf("cb-a-next", "team-a", core.StateScheduled),
		"cb-a-term":    term,
		"cb-a-pending": blockOf("cb-a-pending", "team-a", core.StatePaymentPending),
		"cb-a-old":     blockOf("cb-a-old", "team-a", core.StateExpired),
		"cb-a-gone":    blockOf("cb-a-gone", "team-a", core.StateCancelled),
		"cb-b":         blockOf("cb-b", "team-b", core.StateActive),
	}
}

var testNamespaces = fakeNamespaces{
	"ml-a":       {TeamLabel: "team-a"},
	"ml-b":       {TeamLabel: "team-b"},
	"no-team":    {"owner": "research"},
	"empty-team": {TeamLabel: ""},
	"off-team":   {TeamLabel: "disabled"},
	"broken":     nil,
}

func newTestHandler(t *testing.T, svc *fakeService, exempt []string) *Handler {
	t.Helper()
	if svc == nil {
		svc = &fakeService{blocks: testBlocks(), nodes: []string{"gpu-0", "gpu-1"}}
	}
	h, err := New(Config{Service: svc, Namespaces: testNamespaces, Exempt: exempt})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// verdict is what a test compares of an answer; message is checked to
// contain the test's words.
type verdict struct {
	Allowed bool
	Code    int32
}

func verdictOf(resp *admissionv1.AdmissionResponse) (verdict, string) {
	v := verdict{Allowed: resp.Allowed}
	if resp.Result != nil {
		v.Code = resp.Result.Code
		return v, resp.Result.Message
	}
	return v, ""
}

var (
	allowed   = verdict{Allowed: true}
	forbidden = verdict{Code: http.StatusForbidden}
)

// TestValidate: the validating webhook's answer to pods as they would be
// stored, every hostile way in among them.
func TestValidate(t *testing.T) {
	complete := func(ns, block string) *podBuilder {
		return makePod("p", ns).Block(block).Tolerate(soldTaint).Terms(term(exists("block.capblock.io/" + block)))
	}
	tests := map[string]struct {
		req  request
		want verdict
		msg  string
	}{
		"a pod that asks nothing":                    {req: create(makePod("p", "no-team").Obj()), want: allowed},
		"a pod tolerating another taint":             {req: create(makePod("p", "ml-b").Tolerate(otherTaint).Obj()), want: allowed},
		"a toleration of the key for NoExecute":      {req: create(makePod("p", "ml-b").Tolerate(soldExecute).Obj()), want: allowed},
		"a toleration of another value":              {req: create(makePod("p", "ml-b").Tolerate(soldFalse).Obj()), want: allowed},
		"a block's pod, complete":                    {req: create(complete("ml-a", "cb-a").Obj()), want: allowed},
		"a block's pod selecting with In":            {req: create(makePod("p", "ml-a").Block("cb-a").Tolerate(soldKey).Terms(term(in(blockKey, "team-a"))).Obj()), want: allowed},
		"a block's pod selecting by nodeSelector":    {req: create(makePod("p", "ml-a").Block("cb-a").Tolerate(soldKey).NodeSelector(blockKey, "team-a").Obj()), want: allowed},
		"a block's pod without the toleration":       {req: create(makePod("p", "ml-a").Block("cb-a").Obj()), want: allowed},
		"a scheduled block's pod":                    {req: create(complete("ml-a", "cb-a-next").Obj()), want: allowed},
		"a pod in an exempt namespace, wildcard":     {req: create(makePod("p", "kube-system").Tolerate(wildcard).Obj()), want: allowed},
		"a pod on a node that is not sold":           {req: create(makePod("p", "ml-b").NodeName("cpu-0").Obj()), want: allowed},
		"another team's block":                       {req: create(complete("ml-b", "cb-a").Obj()), want: forbidden, msg: "block cb-a is not held by team team-b, the team of namespace ml-b"},
		"another team's block, no toleration":        {req: create(makePod("p", "ml-b").Block("cb-a").Obj()), want: forbidden, msg: "not held by team team-b"},
		"a block that does not exist":                {req: create(complete("ml-a", "cb-zz").Obj()), want: forbidden, msg: "block cb-zz is not held by team team-a"},
		"a disabled team's namespace":                {req: create(complete("off-team", "cb-a").Obj()), want: forbidden, msg: "namespace off-team's team cannot hold blocks: team disabled was disabled"},
		"the toleration copied by hand":              {req: create(makePod("p", "ml-b").Tolerate(soldTaint).Obj()), want: forbidden, msg: "tolerates capblock's taint capblock.io/sold=true:NoSchedule, but names no block"},
		"the toleration by value":                    {req: create(makePod("p", "ml-b").Tolerate(soldEqual).Obj()), want: forbidden, msg: "names no block"},
		"the toleration by a comparison":             {req: create(makePod("p", "ml-b").Tolerate(soldGt).Obj()), want: forbidden, msg: "names no block"},
		"the toleration and affinity copied":         {req: create(makePod("p", "ml-b").Tolerate(soldTaint).Terms(term(exists(blockKey))).Obj()), want: forbidden, msg: "names no block"},
		"a wildcard toleration":                      {req: create(makePod("p", "ml-a").Tolerate(wildcard).Obj()), want: forbidden, msg: "tolerates every taint"},
		"a wildcard toleration of NoSchedule":        {req: create(makePod("p", "no-team").Tolerate(wildSchedule).Obj()), want: forbidden, msg: "tolerates every taint"},
		"a wildcard after the key":                   {req: create(makePod("p", "ml-a").Tolerate(soldKey).Tolerate(wildcard).Obj()), want: forbidden, msg: "tolerates every taint"},
		"a sold node by name":                        {req: create(makePod("p", "ml-b").NodeName("gpu-0").Obj()), want: forbidden, msg: "sets spec.nodeName to gpu-0, a node that capblock sells"},
		"a block's pod naming its node":              {req: create(complete("ml-a", "cb-a").NodeName("gpu-0").Obj()), want: forbidden, msg: "must leave spec.nodeName empty"},
		"a block's pod on every node":                {req: create(makePod("p", "ml-a").Block("cb-a").Tolerate(soldKey).Obj()), want: forbidden, msg: "must require the node label block.capblock.io/cb-a, in its nodeSelector or in every term"},
		"a block's pod selecting another block":      {req: create(makePod("p", "ml-a").Block("cb-a").Tolerate(soldKey).NodeSelector("block.capblock.io/cb-b", "team-b").Obj()), want: forbidden, msg: "in every term"},
		"a block's pod with a way around":            {req: create(complete("ml-a", "cb-a").Terms(term(exists(blockKey)), term(in("zone", "a"))).Obj()), want: forbidden, msg: "in every term"},
		"a block's pod selecting another's nodes":    {req: create(makePod("p", "ml-a").Block("cb-a").Tolerate(soldKey).Terms(term(exists("block.capblock.io/cb-b"))).Obj()), want: forbidden, msg: "in every term"},
		"a block's pod excluding the label":          {req: create(makePod("p", "ml-a").Block("cb-a").Tolerate(soldKey).Terms(term(corev1.NodeSelectorRequirement{Key: blockKey, Operator: corev1.NodeSelectorOpDoesNotExist})).Obj()), want: forbidden, msg: "in every term"},
		"a block's pod in a namespace of no team":    {req: create(complete("no-team", "cb-a").Obj()), want: forbidden, msg: "namespace no-team belongs to no capblock team"},
		"an empty team is no team (not an admin)":    {req: create(complete("empty-team", "cb-a").Obj()), want: forbidden, msg: "namespace empty-team belongs to no capblock team"},
		"a block's pod in an unknown namespace":      {req: create(complete("nowhere", "cb-a").Obj()), want: forbidden, msg: "belongs to no capblock team"},
		"a terminating block":                        {req: create(complete("ml-a", "cb-a-term").Obj()), want: forbidden, msg: "block cb-a-term takes no pods: it is terminating (it ends at 2026-12-01T04:00:00Z)"},
		"a block waiting for approval":               {req: create(complete("ml-a", "cb-a-pending").Obj()), want: forbidden, msg: "waiting for an administrator's approval"},
		"an expired block":                           {req: create(complete("ml-a", "cb-a-old").Obj()), want: forbidden, msg: "it has ended (expired)"},
		"a cancelled block":                          {req: create(complete("ml-a", "cb-a-gone").Obj()), want: forbidden, msg: "it has ended (cancelled)"},
		"a namespace that cannot be read":            {req: create(complete("broken", "cb-a").Obj()), want: verdict{Code: http.StatusInternalServerError}, msg: "could not read namespace broken; try again"},
		"pods' status is not capblock's":             {req: request{op: admissionv1.Update, pod: makePod("p", "ml-a").Obj(), old: makePod("p", "ml-a").Obj(), sub: "status"}, want: verdict{Code: http.StatusBadRequest}, msg: "pods only, not pods/status"},
		"a deployment is not capblock's":             {req: request{op: admissionv1.Create, pod: makePod("p", "ml-a").Obj(), resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}}, want: verdict{Code: http.StatusBadRequest}, msg: "not deployments.apps"},
		"a delete passes":                            {req: request{op: admissionv1.Delete, old: makePod("p", "ml-b").Tolerate(wildcard).Obj()}, want: allowed},
		"update: finalizers of an ended block":       {req: update(complete("ml-a", "cb-a-old").Finalizer("x/y").Obj(), complete("ml-a", "cb-a-old").Obj()), want: allowed},
		"update: another toleration":                 {req: update(complete("ml-a", "cb-a").Obj(), complete("ml-a", "cb-a").Tolerate(otherTaint).Obj()), want: allowed},
		"update: an old pod that tolerates":          {req: update(makePod("p", "ml-b").Tolerate(soldKey).Obj(), makePod("p", "ml-b").Tolerate(soldKey).Finalizer("x/y").Obj()), want: allowed},
		"update: the toleration added":               {req: update(makePod("p", "ml-b").Obj(), makePod("p", "ml-b").Tolerate(soldKey).Obj()), want: forbidden, msg: "names no block"},
		"update: a wildcard added to a block pod":    {req: update(complete("ml-a", "cb-a-term").Obj(), complete("ml-a", "cb-a-term").Tolerate(wildcard).Obj()), want: forbidden, msg: "it is terminating"},
		"update: the block label removed":            {req: update(complete("ml-a", "cb-a").Obj(), makePod("p", "ml-a").Tolerate(soldTaint).Terms(term(exists(blockKey))).Obj()), want: forbidden, msg: `cannot change (it was "cb-a", it would be "")`},
		"update: the block label changed":            {req: update(complete("ml-a", "cb-a").Obj(), complete("ml-a", "cb-a-next").Obj()), want: forbidden, msg: "cannot change"},
		"update: a block label added to a plain pod": {req: update(makePod("p", "ml-a").Obj(), makePod("p", "ml-a").Block("cb-a").Obj()), want: forbidden, msg: "cannot change"},
	}
	h := newTestHandler(t, nil, nil)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, resp := post(t, h, ValidatePath, tc.req)
			if code != http.StatusOK {
				t.Fatalf("HTTP %d", code)
			}
			if resp.Patch != nil {
				t.Errorf("the validating webhook patched the pod: %s", resp.Patch)
			}
			got, msg := verdictOf(resp)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("verdict (-want +got):\n%s\nmessage: %s", diff, msg)
			}
			if !strings.Contains(msg, tc.msg) {
				t.Errorf("message %q, want it to contain %q", msg, tc.msg)
			}
		})
	}
}

// TestMutate: the mutating webhook gives a held block's pod the taint's
// toleration and keeps every term of its node affinity on the block's
// nodes; what it admits, the validating webhook admits too.
func TestMutate(t *testing.T) {
	added := corev1.Toleration{Key: "capblock.io/sold", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	tests := map[string]struct {
		pod             *corev1.Pod
		wantTolerations []corev1.Toleration
		wantTerms       []corev1.NodeSelectorTerm
		wantPatch       bool
	}{
		"a bare pod of the block": {
			pod:             makePod("p", "ml-a").Block("cb-a").Obj(),
			wantTolerations: []corev1.Toleration{added},
			wantTerms:       []corev1.NodeSelectorTerm{term(exists(blockKey))},
			wantPatch:       true,
		},
		"a scheduled block's pod": {
			pod:             makePod("p", "ml-a").Block("cb-a-next").Obj(),
			wantTolerations: []corev1.Toleration{added},
			wantTerms:       []corev1.NodeSelectorTerm{term(exists("block.capblock.io/cb-a-next"))},
			wantPatch:       true,
		},
		"each term of its own narrowed, an empty one left empty": {
			pod:             makePod("p", "ml-a").Block("cb-a").Tolerate(otherTaint).Terms(term(in("zone", "a")), term(in("zone", "b")), term()).Obj(),
			wantTolerations: []corev1.Toleration{otherTaint, added},
			wantTerms:       []corev1.NodeSelectorTerm{term(in("zone", "a"), exists(blockKey)), term(in("zone", "b"), exists(blockKey)), term()},
			wantPatch:       true,
		},
		"a wildcard of its own is kept": {
			pod:             makePod("p", "ml-a").Block("cb-a").Tolerate(wildcard).Obj(),
			wantTolerations: []corev1.Toleration{wildcard},
			wantTerms:       []corev1.NodeSelectorTerm{term(exists(blockKey))},
			wantPatch:       true,
		},
		"only empty terms": {
			pod:             makePod("p", "ml-a").Block("cb-a").Tolerate(soldKey).Terms(term()).Obj(),
			wantTolerations: []corev1.Toleration{soldKey},
			wantTerms:       []corev1.NodeSelectorTerm{term(), term(exists(blockKey))},
			wantPatch:       true,
		},
		"selecting by nodeSelector": {
			pod:             makePod("p", "ml-a").Block("cb-a").NodeSelector(blockKey, "team-a").Terms(term(in("zone", "a"))).Obj(),
			wantTolerations: []corev1.Toleration{added},
			wantTerms:       []corev1.NodeSelectorTerm{term(in("zone", "a"))},
			wantPatch:       true,
		},
		"complete already": {
			pod:             makePod("p", "ml-a").Block("cb-a").Tolerate(soldKey).Terms(term(in(blockKey, "team-a"))).Obj(),
			wantTolerations: []corev1.Toleration{soldKey},
			wantTerms:       []corev1.NodeSelectorTerm{term(in(blockKey, "team-a"))},
		},
	}
	h := newTestHandler(t, nil, nil)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, resp := post(t, h, MutatePath, create(tc.pod))
			if code != http.StatusOK || !resp.Allowed {
				t.Fatalf("HTTP %d, %+v; want the pod admitted", code, resp)
			}
			if got := resp.Patch != nil; got != tc.wantPatch {
				t.Errorf("patched %v, want %v", got, tc.wantPatch)
			}
			got := applyPatch(t, tc.pod, resp)
			if diff := cmp.Diff(tc.wantTolerations, got.Spec.Tolerations); diff != "" {
				t.Errorf("tolerations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantTerms, got.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms); diff != "" {
				t.Errorf("required terms (-want +got):\n%s", diff)
			}
			if _, resp := post(t, h, ValidatePath, create(got)); !resp.Allowed {
				t.Errorf("the validating webhook refuses the mutated pod: %s", resp.Result.Message)
			}
		})
	}
}

// TestMutateRefuses: the mutating webhook refuses what the validating
// one would, and patches nothing then.
func TestMutateRefuses(t *testing.T) {
	h := newTestHandler(t, nil, nil)
	for _, pod := range []*corev1.Pod{
		makePod("p", "ml-b").Block("cb-a").Obj(),
		makePod("p", "ml-a").Block("cb-a-term").Obj(),
		makePod("p", "ml-a").Block("cb-a").NodeName("gpu-0").Obj(),
		makePod("p", "ml-b").Tolerate(wildcard).Obj(),
	} {
		_, resp := post(t, h, MutatePath, create(pod))
		if resp.Allowed || resp.Patch != nil {
			t.Errorf("pod %v %v: allowed %v, patch %s; want a refusal", pod.Labels, pod.Spec.Tolerations, resp.Allowed, resp.Patch)
		}
	}
}

// TestAnotherTeamsBlockIsUnknown: a pod naming another team's block gets
// word for word the answer of one naming a block that does not exist.
func TestAnotherTeamsBlockIsUnknown(t *testing.T) {
	h := newTestHandler(t, nil, nil)
	for _, path := range []string{MutatePath, ValidatePath} {
		_, theirs := post(t, h, path, create(makePod("p", "ml-b").Block("cb-a").Obj()))
		_, unknown := post(t, h, path, create(makePod("p", "ml-b").Block("cb-zz").Obj()))
		mine := *theirs.Result
		mine.Message = strings.ReplaceAll(mine.Message, "cb-a", "cb-zz")
		if diff := cmp.Diff(*unknown.Result, mine); diff != "" {
			t.Errorf("%s: another team's block, its id replaced, answers (-unknown +theirs):\n%s", path, diff)
		}
	}
}

// TestServiceFailure: when the service cannot answer, the pod is refused
// with a message that says so without the error's words.
func TestServiceFailure(t *testing.T) {
	h := newTestHandler(t, &fakeService{err: errors.New("pq: password authentication failed for user capblock")}, nil)
	_, resp := post(t, h, ValidatePath, create(makePod("p", "ml-a").Block("cb-a").Obj()))
	got, msg := verdictOf(resp)
	if got != (verdict{Code: http.StatusInternalServerError}) || msg != "capblock could not read block cb-a; try again" {
		t.Errorf("verdict %+v, message %q", got, msg)
	}
}

// TestExempt: the exempt namespaces are configurable; an empty list
// exempts none, kube-system included.
func TestExempt(t *testing.T) {
	pod := makePod("p", "kube-system").Tolerate(wildcard).Obj()
	tests := map[string]struct {
		exempt []string
		want   bool
	}{
		"the default":   {exempt: nil, want: true},
		"none":          {exempt: []string{}, want: false},
		"another":       {exempt: []string{"monitoring"}, want: false},
		"kube-system":   {exempt: []string{"monitoring", "kube-system"}, want: true},
		"a prefix only": {exempt: []string{"kube"}, want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, resp := post(t, newTestHandler(t, nil, tc.exempt), ValidatePath, create(pod))
			if resp.Allowed != tc.want {
				t.Errorf("allowed %v, want %v", resp.Allowed, tc.want)
			}
		})
	}
	if _, err := New(Config{Service: &fakeService{}, Namespaces: testNamespaces, Exempt: []string{"Kube_System"}}); err == nil {
		t.Error("New took an exempt namespace that is not a namespace's name")
	}
}

// TestNotAReview: what is not an AdmissionReview of admission.k8s.io/v1
// posted as JSON to a webhook's path is an HTTP error, which the API
// server, with failurePolicy Fail, takes as a refusal.
func TestNotAReview(t *testing.T) {
	h := newTestHandler(t, nil, nil)
	tests := map[string]struct {
		path, contentType, body string
		want                    int
	}{
		"another path":        {path: "/", contentType: "application/json", body: "{}", want: http.StatusNotFound},
		"not JSON":            {path: ValidatePath, contentType: "text/plain", body: "{}", want: http.StatusUnsupportedMediaType},
		"garbage":             {path: ValidatePath, contentType: "application/json", body: "{", want: http.StatusBadRequest},
		"no request":          {path: ValidatePath, contentType: "application/json", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, want: http.StatusBadRequest},
		"v1beta1":             {path: MutatePath, contentType: "application/json", body: `{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u"}}`, want: http.StatusBadRequest},
		"too large":           {path: ValidatePath, contentType: "application/json", body: `{"x":"` + strings.Repeat("a", maxReview) + `"}`, want: http.StatusRequestEntityTooLarge},
		"a pod that is not":   {path: ValidatePath, contentType: "application/json", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","namespace":"ml-a","resource":{"version":"v1","resource":"pods"},"object":{"kind":"Secret"}}}`, want: http.StatusOK},
		"json with a charset": {path: ValidatePath, contentType: "application/json; charset=utf-8", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"DELETE","resource":{"version":"v1","resource":"pods"}}}`, want: http.StatusOK},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, body := postRaw(t, h, tc.path, tc.contentType, []byte(tc.body))
			if code != tc.want {
				t.Errorf("HTTP %d, want %d: %s", code, tc.want, body)
			}
			if code == http.StatusOK && name == "a pod that is not" && !strings.Contains(string(body), `"allowed":false`) {
				t.Errorf("a Secret posted as a pod was not refused: %s", body)
			}
		})
	}
}

// BenchmarkValidate is one review of a held block's pod, from the HTTP
// body to the answer, with the blocks and namespaces in memory: the
// webhook's own cost, beside the service's read of the block.
func BenchmarkValidate(b *testing.B) {
	h, err := New(Config{Service: &fakeService{blocks: testBlocks()}, Namespaces: testNamespaces})
	if err != nil {
		b.Fatal(err)
	}
	pod := makePod("p", "ml-a").Block("cb-a").Tolerate(soldTaint).Terms(term(exists(blockKey))).Obj()
	for b.Loop() {
		if _, resp := post(b, h, ValidatePath, create(pod)); !resp.Allowed {
			b.Fatal("refused")
		}
	}
}
