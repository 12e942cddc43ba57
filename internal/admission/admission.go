package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/kubenames"
)

// Service is what admission asks capblock: the principal of a team's
// workloads (contract.Gate's Workloads), a block as that principal sees
// it (another team's is core.ErrNotFound), and whether a node is one the
// fleet sells. contract.Front satisfies it; the service decides what the
// principal may read.
type Service interface {
	Workloads(ctx context.Context, team string) (core.Principal, error)
	GetBlock(ctx context.Context, team, id string) (core.Block, error)
	Sells(node string) bool
}

// Namespaces reads a namespace's labels; a namespace that does not exist
// has none.
type Namespaces interface {
	Labels(ctx context.Context, name string) (map[string]string, error)
}

// The paths of the two webhooks.
const (
	MutatePath   = "/mutate"
	ValidatePath = "/validate"
)

// TeamLabel is the namespace label that names the team a namespace
// belongs to.
const TeamLabel = "capblock.io/team"

// DefaultExempt are the namespaces whose pods are not checked: the
// cluster's own (DaemonSets there tolerate every taint) and the one that
// deploy/kubernetes runs capblock in.
var DefaultExempt = []string{"kube-system", "capblock-system"}

// maxReview bounds the body of one review: two pods (an update's old
// and new), each at most about 1.5 MiB as etcd stores it.
const maxReview = 8 << 20

// lookupTimeout bounds the reads of one review, within the webhooks'
// timeoutSeconds (5).
const lookupTimeout = 4 * time.Second

// Config is what a Handler is built from.
type Config struct {
	Service    Service
	Namespaces Namespaces
	// Exempt are the namespaces whose pods pass unchecked. nil means
	// DefaultExempt; an empty, non-nil list exempts none.
	Exempt []string
	// Taint, BlockLabelDomain and PodBlockLabel must be the backend's;
	// their defaults are its defaults.
	Taint            corev1.Taint
	BlockLabelDomain string
	PodBlockLabel    string
	// Log records every refusal, and every error behind one.
	Log *slog.Logger
}

// Handler serves both webhooks: MutatePath and ValidatePath.
type Handler struct {
	cfg Config
	log *slog.Logger
}

// New checks cfg and fills in its defaults.
func New(cfg Config) (*Handler, error) {
	if cfg.Service == nil || cfg.Namespaces == nil {
		return nil, errors.New("admission: a Service and Namespaces are needed")
	}
	if cfg.Exempt == nil {
		cfg.Exempt = DefaultExempt
	}
	if cfg.Taint.Key == "" {
		cfg.Taint = kubenames.DefaultTaint
	}
	if cfg.BlockLabelDomain == "" {
		cfg.BlockLabelDomain = kubenames.DefaultBlockLabelDomain
	}
	if cfg.PodBlockLabel == "" {
		cfg.PodBlockLabel = kubenames.DefaultPodBlockLabel
	}
	for _, ns := range cfg.Exempt {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("exempt namespace %q: %s", ns, errs[0])
		}
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{cfg: cfg, log: log}, nil
}

// ServeHTTP answers an AdmissionReview (admission.k8s.io/v1) posted to
// MutatePath or ValidatePath. A body that is not one is a 400, which the
// API server takes as a failed call: with failurePolicy Fail, a refusal.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var mutate bool
	switch r.URL.Path {
	case MutatePath:
		mutate = true
	case ValidatePath:
	default:
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	if ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || ct != "application/json" {
		http.Error(w, "want Content-Type application/json", http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReview))
	if err != nil {
		http.Error(w, "reading the review: "+err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		http.Error(w, "the body is not an AdmissionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	if review.APIVersion != admissionv1.SchemeGroupVersion.String() || review.Kind != "AdmissionReview" || review.Request == nil {
		http.Error(w, "want an AdmissionReview of admission.k8s.io/v1 with a request", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), lookupTimeout)
	defer cancel()
	resp := h.review(ctx, review.Request, mutate)
	resp.UID = review.Request.UID
	out, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
	if err != nil {
		http.Error(w, "encoding the answer", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

var podResource = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}

// review decides on one request: the numbered steps are the rules of
// the package comment.
func (h *Handler) review(ctx context.Context, req *admissionv1.AdmissionRequest, mutate bool) *admissionv1.AdmissionResponse {
	// 1. Pods only, as they are created or updated.
	if req.Resource != podResource || req.SubResource != "" {
		return refuse(http.StatusBadRequest, "capblock admits pods only, not %s", resourceName(req))
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return allow()
	}
	if slices.Contains(h.cfg.Exempt, req.Namespace) {
		return allow()
	}
	// 2. What the pod asks of capblock, and, on an update, whether that
	// changed.
	pod, err := decodePod(req.Object.Raw)
	if err != nil {
		return refuse(http.StatusBadRequest, "the review's object is not a pod: %v", err)
	}
	f := h.factsOf(pod)
	if req.Operation == admissionv1.Update {
		mutate = false // the mutating webhook is for creation
		old, err := decodePod(req.OldObject.Raw)
		if err != nil {
			return refuse(http.StatusBadRequest, "the review's old object is not a pod: %v", err)
		}
		was := h.factsOf(old)
		if was == f {
			return allow()
		}
		if was.block != f.block {
			return h.refused(req, f.block, http.StatusForbidden, "the label %s of a pod is set when it is created and cannot change (it was %q, it would be %q): create a new pod", h.cfg.PodBlockLabel, was.block, f.block)
		}
	}
	// 3. A pod that names no block must not reach a sold node.
	if f.block == "" {
		if why := h.reachesSoldNodes(f); why != "" {
			return h.refused(req, "", http.StatusForbidden, "%s, but names no block: a pod on capblock's nodes must carry the label %s=<block id> of a block that its namespace's team holds", why, h.cfg.PodBlockLabel)
		}
		return allow()
	}
	// 4. The team of its namespace, and the block as that team sees it.
	team, resp := h.team(ctx, req, f.block)
	if resp != nil {
		return resp
	}
	p, err := h.cfg.Service.Workloads(ctx, team)
	switch {
	case errors.Is(err, core.ErrUnauthenticated):
		why := strings.TrimPrefix(err.Error(), core.ErrUnauthenticated.Error()+": ")
		return h.refused(req, f.block, http.StatusForbidden, "the pod names block %s, but namespace %s's team cannot hold blocks: %s", f.block, req.Namespace, why)
	case err != nil:
		h.log.Error("finding a namespace's team for admission", "namespace", req.Namespace, "team", team, "err", err)
		return refuse(http.StatusInternalServerError, "capblock could not read team %s; try again", team)
	}
	blk, err := h.cfg.Service.GetBlock(contract.WithPrincipal(ctx, p), team, f.block)
	switch {
	case errors.Is(err, core.ErrNotFound):
		return h.refused(req, f.block, http.StatusForbidden, "block %s is not held by team %s, the team of namespace %s", f.block, team, req.Namespace)
	case err != nil:
		h.log.Error("reading a pod's block for admission", "namespace", req.Namespace, "block", f.block, "err", err)
		return refuse(http.StatusInternalServerError, "capblock could not read block %s; try again", f.block)
	}
	// 5. A block that takes pods, which the scheduler places.
	if why := takesNoPods(blk); why != "" {
		return h.refused(req, f.block, http.StatusForbidden, "block %s takes no pods: %s", blk.ID, why)
	}
	if f.nodeName != "" {
		return h.refused(req, f.block, http.StatusForbidden, "a pod of block %s must leave spec.nodeName empty (it is %s): the scheduler places it on the block's nodes", blk.ID, f.nodeName)
	}
	// 6. Mutate: the toleration and the affinity it lacks. Validate: a
	// pod that tolerates the taint is kept on the block's nodes.
	if mutate {
		return h.patched(pod, f)
	}
	if f.tolerates != tolerationNone && !f.selects {
		return h.refused(req, f.block, http.StatusForbidden, "a pod of block %s that tolerates the taint %s must require the node label %s, in its nodeSelector or in every term of its required node affinity (capblock's mutating webhook adds it)", blk.ID, taintString(h.cfg.Taint), h.blockLabel(blk.ID))
	}
	return allow()
}

// team returns the team of the request's namespace, or the refusal when
// it has none.
func (h *Handler) team(ctx context.Context, req *admissionv1.AdmissionRequest, block string) (string, *admissionv1.AdmissionResponse) {
	labels, err := h.cfg.Namespaces.Labels(ctx, req.Namespace)
	if err != nil {
		h.log.Error("reading a namespace for admission", "namespace", req.Namespace, "err", err)
		return "", refuse(http.StatusInternalServerError, "capblock could not read namespace %s; try again", req.Namespace)
	}
	// An empty team would be the admin's scope, which sees every team's
	// blocks: it is no team.
	team := labels[TeamLabel]
	if team == "" {
		return "", h.refused(req, block, http.StatusForbidden, "the pod names block %s, but namespace %s belongs to no capblock team (it has no label %s)", block, req.Namespace, TeamLabel)
	}
	return team, nil
}

// takesNoPods says why blk takes no new pod, or "" when it takes them.
func takesNoPods(blk core.Block) string {
	switch {
	case blk.State == core.StateScheduled:
		return ""
	case blk.State == core.StateActive && !blk.Terminating:
		return ""
	case blk.State == core.StateActive:
		return "it is terminating (it ends at " + blk.End.UTC().Format(time.RFC3339) + ") and its pods are being evicted"
	case blk.State == core.StatePaymentPending:
		return "it is waiting for an administrator's approval"
	default:
		return "it has ended (" + string(blk.State) + ")"
	}
}

// reachesSoldNodes says how a pod that names no block could land on a
// sold node, or "" when it cannot.
func (h *Handler) reachesSoldNodes(f podFacts) string {
	switch {
	case f.tolerates == tolerationWildcard:
		return "the pod tolerates every taint (a toleration with operator Exists and no key), capblock's " + taintString(h.cfg.Taint) + " included"
	case f.tolerates == tolerationKey:
		return "the pod tolerates capblock's taint " + taintString(h.cfg.Taint)
	case f.nodeName != "" && h.sold(f.nodeName):
		return "the pod sets spec.nodeName to " + f.nodeName + ", a node that capblock sells"
	}
	return ""
}

// sold reports whether node is one of the fleet's.
func (h *Handler) sold(node string) bool { return h.cfg.Service.Sells(node) }

// refused logs a refusal and returns it.
func (h *Handler) refused(req *admissionv1.AdmissionRequest, block string, code int32, format string, args ...any) *admissionv1.AdmissionResponse {
	resp := refuse(code, format, args...)
	h.log.Info("refused a pod", "namespace", req.Namespace, "pod", podName(req), "operation", req.Operation,
		"user", req.UserInfo.Username, "block", block, "reason", resp.Result.Message)
	return resp
}

func allow() *admissionv1.AdmissionResponse { return &admissionv1.AdmissionResponse{Allowed: true} }

func refuse(code int32, format string, args ...any) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: code, Reason: reasonOf(code), Message: fmt.Sprintf(format, args...),
	}}
}

func reasonOf(code int32) metav1.StatusReason {
	switch code {
	case http.StatusForbidden:
		return metav1.StatusReasonForbidden
	case http.StatusBadRequest:
		return metav1.StatusReasonBadRequest
	}
	return metav1.StatusReasonInternalError
}

func resourceName(req *admissionv1.AdmissionRequest) string {
	s := req.Resource.Resource
	if req.Resource.Group != "" {
		s += "." + req.Resource.Group
	}
	if req.SubResource != "" {
		s += "/" + req.SubResource
	}
	return s
}

// podName is the request's pod, or its generateName prefix while the API
// server has not named it yet.
func podName(req *admissionv1.AdmissionRequest) string {
	if req.Name != "" {
		return req.Name
	}
	var meta struct {
		Metadata struct {
			GenerateName string `json:"generateName"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(req.Object.Raw, &meta)
	return meta.Metadata.GenerateName + "…"
}

func taintString(t corev1.Taint) string {
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}
