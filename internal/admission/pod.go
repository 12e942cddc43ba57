package admission

import (
	"encoding/json"
	"errors"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
)

// toleration is how far a pod tolerates the sold taint.
type toleration int

const (
	tolerationNone     toleration = iota
	tolerationKey                 // a toleration of the taint's key
	tolerationWildcard            // a toleration of every taint
)

// podFacts are what admission reads of a pod: two pods with the same
// facts are alike to it.
type podFacts struct {
	block     string // its block label's value, "" without one
	tolerates toleration
	// selects: its nodeSelector, or every term of its required node
	// affinity, requires the block's node label, so that it lands on no
	// other node (false without a block).
	selects  bool
	nodeName string
}

func decodePod(raw []byte) (*corev1.Pod, error) {
	if len(raw) == 0 {
		return nil, errors.New("no object")
	}
	var pod corev1.Pod
	if err := json.Unmarshal(raw, &pod); err != nil {
		return nil, err
	}
	if pod.Kind != "" && pod.Kind != "Pod" {
		return nil, errors.New("kind " + pod.Kind)
	}
	return &pod, nil
}

func (h *Handler) factsOf(pod *corev1.Pod) podFacts {
	f := podFacts{block: pod.Labels[h.cfg.PodBlockLabel], nodeName: pod.Spec.NodeName}
	for _, t := range pod.Spec.Tolerations {
		switch {
		case t.Key == "" && tolerates(t, h.cfg.Taint):
			f.tolerates = tolerationWildcard
		case tolerates(t, h.cfg.Taint) && f.tolerates == tolerationNone:
			f.tolerates = tolerationKey
		}
	}
	if f.block != "" {
		key := h.blockLabel(f.block)
		_, bySelector := pod.Spec.NodeSelector[key]
		f.selects = bySelector || selects(pod.Spec.Affinity, key)
	}
	return f
}

// tolerates reports whether t may let a pod onto a node with taint. It
// errs towards yes: a key-less toleration is a wildcard whatever its
// operator (the API requires Exists), and an operator other than Equal
// on the taint's key (Exists; Lt and Gt, which compare numbers) counts.
func tolerates(t corev1.Toleration, taint corev1.Taint) bool {
	switch {
	case t.Effect != "" && t.Effect != taint.Effect:
		return false
	case t.Key == "":
		return true
	case t.Key != taint.Key:
		return false
	case t.Operator == "" || t.Operator == corev1.TolerationOpEqual:
		return t.Value == taint.Value
	}
	return true
}

// selects reports whether aff keeps a pod on the nodes with label key:
// every term of its required node affinity requires the key (terms are
// ORed; an empty term selects nothing).
func selects(aff *corev1.Affinity, key string) bool {
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	terms := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	nonEmpty := 0
	for _, term := range terms {
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			continue
		}
		nonEmpty++
		if !requires(term, key) {
			return false
		}
	}
	return nonEmpty > 0
}

// requires reports whether term requires the node label key (Exists, or
// In some values: either way no node without the key matches).
func requires(term corev1.NodeSelectorTerm, key string) bool {
	for _, r := range term.MatchExpressions {
		if r.Key == key && (r.Operator == corev1.NodeSelectorOpExists || r.Operator == corev1.NodeSelectorOpIn) {
			return true
		}
	}
	return false
}

// blockLabel is the label that the backend puts on the nodes of block
// id while it is active. The backend hashes an id that is not a valid
// label name; a pod's label value that names a block is one, and equal
// to its hash-free form.
func (h *Handler) blockLabel(id string) string {
	return h.cfg.BlockLabelDomain + "/" + id
}

// patched admits the pod of a held block with what it lacks: the taint's
// toleration, and the block's node label required in every term of its
// node affinity (added to each existing term, since terms are ORed and
// a term of its own would widen the pod's choice).
func (h *Handler) patched(pod *corev1.Pod, f podFacts) *admissionv1.AdmissionResponse {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	var ops []op
	if f.tolerates == tolerationNone {
		t := corev1.Toleration{Key: h.cfg.Taint.Key, Operator: corev1.TolerationOpExists, Effect: h.cfg.Taint.Effect}
		ops = append(ops, op{"add", "/spec/tolerations", append(pod.Spec.Tolerations, t)})
	}
	if !f.selects {
		ops = append(ops, op{"add", "/spec/affinity", withBlockAffinity(pod.Spec.Affinity, h.blockLabel(f.block))})
	}
	if len(ops) == 0 {
		return allow()
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return refuse(http.StatusInternalServerError, "encoding the pod's patch: %v", err)
	}
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}
}

// withBlockAffinity returns a copy of aff whose required node affinity
// requires key in every term ("add" on /spec/affinity replaces the
// whole of it).
func withBlockAffinity(aff *corev1.Affinity, key string) *corev1.Affinity {
	out := &corev1.Affinity{}
	if aff != nil {
		out = aff.DeepCopy()
	}
	if out.NodeAffinity == nil {
		out.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := out.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	req := corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpExists}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	added := false
	for i, term := range terms {
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			continue // selects nothing, and must go on selecting nothing
		}
		if !requires(term, key) {
			terms[i].MatchExpressions = append(terms[i].MatchExpressions, req)
		}
		added = true
	}
	if !added {
		terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req}})
	}
	na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = terms
	return out
}
