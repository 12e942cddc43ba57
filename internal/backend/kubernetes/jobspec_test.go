package kubernetes

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podFixture builds a pod of a job's run as the kubelet reports it.
type podFixture struct{ p *corev1.Pod }

func makePod() *podFixture {
	return &podFixture{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-1-0-2-abcde",
		Annotations: map[string]string{RunKeyAnnotation: "job-1/0", completionIndex: "2"}}}}
}

func (f *podFixture) phase(p corev1.PodPhase) *podFixture { f.p.Status.Phase = p; return f }

func (f *podFixture) running() *podFixture {
	f.p.Status.Phase = corev1.PodRunning
	f.p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	return f
}

func (f *podFixture) exited(code int32) *podFixture {
	f.p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}}
	return f
}

func (f *podFixture) deleting(at time.Time) *podFixture {
	t := metav1.NewTime(at)
	f.p.DeletionTimestamp = &t
	return f
}

func (f *podFixture) failed(reason string) *podFixture {
	f.p.Status.Phase, f.p.Status.Reason = corev1.PodFailed, reason
	return f
}

func (f *podFixture) obj() *corev1.Pod { return f.p }

// TestPodEnd: how a pod's end reads as an instance's exit code, and when
// a pod being deleted has ended.
func TestPodEnd(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		pod  *corev1.Pod
		gone bool
		want podEnding // err compared by presence
	}{
		"pending":                             {pod: makePod().phase(corev1.PodPending).obj()},
		"running":                             {pod: makePod().running().obj()},
		"succeeded":                           {pod: makePod().phase(corev1.PodSucceeded).exited(0).obj(), want: podEnding{ended: true}},
		"failed with its container's code":    {pod: makePod().exited(3).phase(corev1.PodFailed).obj(), want: podEnding{ended: true, code: 3}},
		"killed by its kubelet on SIGTERM":    {pod: makePod().exited(143).phase(corev1.PodFailed).obj(), want: podEnding{ended: true, code: 143}},
		"evicted by its kubelet while it ran": {pod: makePod().running().failed("Evicted").obj(), want: podEnding{ended: true, code: ExitKilled, err: errSome}},
		"failed before it ran":                {pod: makePod().failed("UnexpectedAdmissionError").obj(), want: podEnding{ended: true, code: ExitNeverRan, err: errSome}},
		"being deleted, its grace not over": {pod: makePod().running().deleting(now.Add(20 * time.Second)).obj(),
			want: podEnding{recheck: 20 * time.Second}},
		"being deleted, its grace over (its node gone)": {pod: makePod().running().deleting(now.Add(-time.Second)).obj(),
			want: podEnding{ended: true, code: ExitKilled, err: errSome}},
		"deleted after its container exited": {pod: makePod().exited(0).deleting(now.Add(time.Minute)).obj(), gone: true,
			want: podEnding{ended: true}},
		"deleted while it ran":    {pod: makePod().running().obj(), gone: true, want: podEnding{ended: true, code: ExitKilled, err: errSome}},
		"deleted before it ran":   {pod: makePod().phase(corev1.PodPending).obj(), gone: true, want: podEnding{ended: true, code: ExitNeverRan, err: errSome}},
		"succeeded, then deleted": {pod: makePod().phase(corev1.PodSucceeded).deleting(now).obj(), want: podEnding{ended: true}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := podEnd(tc.pod, tc.gone, now)
			if (got.err != nil) != (tc.want.err != nil) {
				t.Errorf("err = %v, want an error: %v", got.err, tc.want.err != nil)
			}
			got.err, tc.want.err = nil, nil
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(podEnding{})); diff != "" {
				t.Errorf("podEnd (-want +got):\n%s", diff)
			}
		})
	}
}

var errSome = errors.New("some error")

// TestJobName: a run's Job is named after its key when the name fits
// the pods' hostnames and a Service's name, else after its hash.
func TestJobName(t *testing.T) {
	const hashed = "a hash"
	tests := map[string]string{
		"job-0123456789abcdef0/3":               "job-0123456789abcdef0-3",
		"job-1/12":                              "job-1-12",
		"Job_Upper/1":                           hashed,
		"job-" + strings.Repeat("a", 60) + "/1": hashed,
		"9-starts-with-a-digit/0":               hashed,
	}
	for run, want := range tests {
		got := jobName(run)
		if want == hashed {
			if !strings.HasPrefix(got, "cb-") || len(got) != len("cb-")+24 || got == jobName(run+"0") {
				t.Errorf("jobName(%q) = %q, want cb- and the run's hash", run, got)
			}
			continue
		}
		if got != want {
			t.Errorf("jobName(%q) = %q, want %q", run, got, want)
		}
	}
}

func TestParseCheckpoint(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    Checkpoint
		wantErr bool
	}{
		"none":                   {in: "", want: Checkpoint{}},
		"emptyDir":               {in: "emptyDir", want: Checkpoint{}},
		"a team's claim":         {in: "pvc:checkpoints-{team}", want: Checkpoint{Claim: "checkpoints-{team}"}},
		"a job's host directory": {in: "hostPath:/var/lib/capblock/{job}", want: Checkpoint{HostPath: "/var/lib/capblock/{job}"}},
		"a claim no name fits":   {in: "pvc:Checkpoints_{team}", wantErr: true},
		"a relative host path":   {in: "hostPath:data/{job}", wantErr: true},
		"an unknown kind":        {in: "nfs:server:/x", wantErr: true},
		"a claim without a name": {in: "pvc:", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseCheckpoint(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseCheckpoint(%q) error = %v, want an error: %v", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); !tc.wantErr && diff != "" {
				t.Errorf("ParseCheckpoint(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}
