package kube

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"

	"capblock/internal/backend/kubernetes"
	"capblock/internal/kubetest"
)

// labelHold is a fault of the cluster: a validating webhook that holds
// every request labelling one of some nodes with a block's label, until
// the test lets it go, and then refuses it. capblock's activation of a
// block on those nodes hangs half done, as when its server is killed in
// the middle of it, with no fault of its own code.
//
// A hold may also end the other way: allow lets the held requests
// through, late, as a paused process's requests land when it resumes.
type labelHold struct {
	c       *cluster
	name    string
	held    chan string   // a node whose labelling is held
	release chan struct{} // closed: every held request is refused
	allowed chan struct{} // closed: every held request is allowed
}

// holdLabels starts the webhook and registers it for nodes.
func (c *cluster) holdLabels(t *testing.T, pki testPKI, nodes []string) *labelHold {
	t.Helper()
	return c.holdLabelsOf(t, pki, nodes, "", c.admin)
}

// holdLabelsOf is holdLabels for the requests of one user only (every
// user's when user is empty); probe is a client of that user, by which
// the test sees the hold in force.
func (c *cluster) holdLabelsOf(t *testing.T, pki testPKI, nodes []string, user string, probe clientset.Interface) *labelHold {
	t.Helper()
	h := &labelHold{c: c, name: "e2e-hold-block-labels", held: make(chan string, 16), release: make(chan struct{}),
		allowed: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(h.review), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.ServeTLS(ln, pki.certFile, pki.keyFile) }()
	t.Cleanup(func() { h.let(); _ = srv.Close() })

	url := "https://" + ln.Addr().String() + "/hold"
	fail, none, timeout := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone, int32(30)
	quoted := make([]string, len(nodes))
	for i, n := range nodes {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	prefix := kubernetes.DefaultBlockLabelDomain + "/"
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: h.name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "hold.e2e.capblock.io", AdmissionReviewVersions: []string{"v1"}, SideEffects: &none,
			FailurePolicy: &fail, TimeoutSeconds: &timeout,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: pki.caPEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes"}}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "labels-a-held-node", Expression: fmt.Sprintf(
				`object.metadata.name in [%s] && has(object.metadata.labels) && object.metadata.labels.exists(k, k.startsWith(%q)) && `+
					`!(has(oldObject.metadata.labels) && oldObject.metadata.labels.exists(k, k.startsWith(%q)))`,
				strings.Join(quoted, ", "), prefix, prefix) + userCondition(user)}},
		}},
	}
	must(t, kubetest.Create(t.Context(), c.admin.AdmissionregistrationV1().ValidatingWebhookConfigurations(), cfg))
	probePatch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"probe"}}}`, prefix+"e2e-probe")
	kubetest.Eventually(t, "the API server calls the hold webhook", func() (bool, error) {
		_, err := probe.CoreV1().Nodes().Patch(t.Context(), nodes[0], types.MergePatchType, probePatch, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "held by the test"), nil
	})
	return h
}

// userCondition is the part of the hold's condition that selects user.
func userCondition(user string) string {
	if user == "" {
		return ""
	}
	return fmt.Sprintf(` && request.userInfo.username == %q`, user)
}

// review holds a request until let, or 25 s (within the webhook's
// timeout), then refuses it.
func (h *labelHold) review(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	allow := false
	if dry := review.Request.DryRun; dry == nil || !*dry { // a dry run is the test's probe: refused at once
		select {
		case h.held <- review.Request.Name:
		default:
		}
		select {
		case <-h.release:
		case <-h.allowed:
			allow = true
		case <-time.After(25 * time.Second):
		case <-r.Context().Done():
		}
	}
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: allow}
	if !allow {
		review.Response.Result = &metav1.Status{Code: http.StatusForbidden, Message: "held by the test"}
	}
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

// let refuses every held request, and every later one at once.
func (h *labelHold) let() {
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

// allow allows every held request.
func (h *labelHold) allow() { close(h.allowed) }

// remove lets go and unregisters the webhook.
func (h *labelHold) remove(t *testing.T) {
	t.Helper()
	h.let()
	must(t, h.c.admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(t.Context(), h.name, metav1.DeleteOptions{}))
}

// waitHeld waits until n requests are held, and returns their nodes.
func (h *labelHold) waitHeld(t *testing.T, n int) []string {
	t.Helper()
	var nodes []string
	timeout := time.After(30 * time.Second)
	for len(nodes) < n {
		select {
		case node := <-h.held:
			nodes = append(nodes, node)
		case <-timeout:
			t.Fatalf("%d labelling(s) held in 30 s, want %d: %v", len(nodes), n, nodes)
		}
	}
	return nodes
}
