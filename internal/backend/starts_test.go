package backend

import "testing"

// TestStartsVerdict: an end is reported for the instances whose Start
// was applied or that were adopted, and for runs this Open never
// started; held for the other instances of a run it started, until
// their Start; dropped for those stopped before it.
func TestStartsVerdict(t *testing.T) {
	tests := map[string]struct {
		steps func(s *Starts)
		run   string
		rank  int
		want  EndVerdict
	}{
		"a run never started here": {
			steps: func(s *Starts) {}, run: "job-1/1", rank: 2, want: ReportEnd,
		},
		"an instance started": {
			steps: func(s *Starts) { s.Start("job-1/1", 0); s.Start("job-1/1", 2) }, run: "job-1/1", rank: 2, want: ReportEnd,
		},
		"an instance adopted, of a run started since": {
			steps: func(s *Starts) { s.Adopt("job-1/1", 2); s.Start("job-1/1", 3) }, run: "job-1/1", rank: 2, want: ReportEnd,
		},
		"an instance not started yet, of a run started": {
			steps: func(s *Starts) { s.Start("job-1/1", 0) }, run: "job-1/1", rank: 2, want: HoldEnd,
		},
		"an instance stopped before its start": {
			steps: func(s *Starts) { s.Start("job-1/1", 0); s.Stop("job-1/1", 2) }, run: "job-1/1", rank: 2, want: DropEnd,
		},
		"an instance stopped after its start": {
			steps: func(s *Starts) { s.Start("job-1/1", 0); s.Start("job-1/1", 2); s.Stop("job-1/1", 2) }, run: "job-1/1", rank: 2, want: ReportEnd,
		},
		"an instance stopped, of a run never started here": {
			steps: func(s *Starts) { s.Stop("job-1/1", 2) }, run: "job-1/1", rank: 2, want: ReportEnd,
		},
		"another run of the job started": {
			steps: func(s *Starts) { s.Start("job-1/2", 0) }, run: "job-1/1", rank: 2, want: ReportEnd,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := NewStarts()
			tc.steps(s)
			if got := s.Verdict(tc.run, tc.rank); got != tc.want {
				t.Errorf("verdict(%s, %d) = %d, want %d", tc.run, tc.rank, got, tc.want)
			}
		})
	}
}
