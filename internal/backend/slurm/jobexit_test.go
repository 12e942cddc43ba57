package slurm

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestJobFieldsExit: an instance whose task wrote no status takes its
// job's, as `scontrol show job` keeps it.
func TestJobFieldsExit(t *testing.T) {
	tests := map[string]struct {
		out      string
		wantCode int
		wantErr  bool
	}{
		"completed": {out: "JobId=7 JobName=j/0 JobState=COMPLETED Reason=None Dependency=(null) ExitCode=0:0 RunTime=00:00:03 StartTime=2026-12-01T10:00:00", wantCode: 0},
		"failed":    {out: "JobId=7 JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0 RunTime=00:00:03 StartTime=2026-12-01T10:00:00", wantCode: 3},
		"signalled": {out: "JobId=7 JobState=CANCELLED Reason=None ExitCode=0:15 RunTime=00:00:09 StartTime=2026-12-01T10:00:00", wantCode: 143, wantErr: true},
		"timeout":   {out: "JobId=7 JobState=TIMEOUT Reason=TimeLimit ExitCode=0:0 RunTime=00:01:00 StartTime=2026-12-01T10:00:00", wantCode: 137, wantErr: true},
		"node fail": {out: "JobId=7 JobState=NODE_FAIL Reason=None ExitCode=1:0 RunTime=00:01:00 StartTime=2026-12-01T10:00:00", wantCode: 1, wantErr: true},
		"never ran": {out: "JobId=7 JobState=CANCELLED Reason=None ExitCode=0:0 RunTime=00:00:00 StartTime=Unknown", wantCode: -1, wantErr: true},
		"no status": {out: "", wantCode: -1, wantErr: true},
		// The first Reason= is the job's; a command or comment may hold
		// another.
		"a command with fields": {out: "JobId=7 JobState=COMPLETED Reason=None ExitCode=0:0 RunTime=00:00:01 StartTime=2026-12-01T10:00:00 Command=run.sh ExitCode=9:0 Reason=x", wantCode: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, err := jobFieldsExit("7", jobFields(tc.out))
			if diff := cmp.Diff(tc.wantCode, code); diff != "" || (err != nil) != tc.wantErr {
				t.Errorf("code (-want +got):\n%s\nerr %v, want an error: %v", diff, err, tc.wantErr)
			}
		})
	}
}
