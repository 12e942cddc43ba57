package kubernetes

import "testing"

// TestStartsVerdict: an end is reported for the instances whose Start
// was applied or that were adopted, and for runs this Open never
// started; held for the other instances of a run it started, until
// their Start; dropped for those stopped before it.
func TestStartsVerdict(t *testing.T) {
	tests := map[string]struct {
		steps func(s *starts)
		run   string
		rank  int
		want  endVerdict
	}{
		"a run never started here": {
			steps: func(s *starts) {}, run: "job-1/1", rank: 2, want: reportEnd,
		},
		"an instance started": {
			steps: func(s *starts) { s.start("job-1/1", 0); s.start("job-1/1", 2) }, run: "job-1/1", rank: 2, want: reportEnd,
		},
		"an instance adopted, of a run started since": {
			steps: func(s *starts) { s.adopt("job-1/1", 2); s.start("job-1/1", 3) }, run: "job-1/1", rank: 2, want: reportEnd,
		},
		"an instance not started yet, of a run started": {
			steps: func(s *starts) { s.start("job-1/1", 0) }, run: "job-1/1", rank: 2, want: holdEnd,
		},
		"an instance stopped before its start": {
			steps: func(s *starts) { s.start("job-1/1", 0); s.stop("job-1/1", 2) }, run: "job-1/1", rank: 2, want: dropEnd,
		},
		"an instance stopped after its start": {
			steps: func(s *starts) { s.start("job-1/1", 0); s.start("job-1/1", 2); s.stop("job-1/1", 2) }, run: "job-1/1", rank: 2, want: reportEnd,
		},
		"an instance stopped, of a run never started here": {
			steps: func(s *starts) { s.stop("job-1/1", 2) }, run: "job-1/1", rank: 2, want: reportEnd,
		},
		"another run of the job started": {
			steps: func(s *starts) { s.start("job-1/2", 0) }, run: "job-1/1", rank: 2, want: reportEnd,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := newStarts()
			tc.steps(s)
			if got := s.verdict(tc.run, tc.rank); got != tc.want {
				t.Errorf("verdict(%s, %d) = %d, want %d", tc.run, tc.rank, got, tc.want)
			}
		})
	}
}
