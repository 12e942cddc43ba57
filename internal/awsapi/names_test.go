package awsapi_test

import (
	"testing"

	"capblock/internal/awsapi"
	"capblock/internal/fleet"
)

func TestNames(t *testing.T) {
	f := fleet.Demo()
	for _, tc := range []struct{ capblock, prefix, want string }{
		{"h100.8x", "", "p5.48xlarge"},
		{"h100.8x", "ml.", "ml.p5.48xlarge"},
		{"a100.8x", "", "p4d.24xlarge"},
		{"a100.8x", "ml.", "ml.p4d.24xlarge"},
		{"l4.4x", "", "g6.12xlarge"},
		{"l4.4x", "ml.", "l4.4x"}, // no SageMaker name: capblock's
		{"l4.1x", "", "g6.xlarge"},
		{"nosuch", "", "nosuch"},
	} {
		if got := awsapi.AWSName(f, tc.capblock, tc.prefix); got != tc.want {
			t.Errorf("AWSName(%s, %q) = %s, want %s", tc.capblock, tc.prefix, got, tc.want)
		}
	}
	for name, want := range map[string]string{
		"p5.48xlarge": "h100.8x", "ml.p5.48xlarge": "h100.8x", "h100.8x": "h100.8x",
		"p4d.24xlarge": "a100.8x", "ml.p4d.24xlarge": "a100.8x", "g6.12xlarge": "l4.4x", "g6.xlarge": "l4.1x", "l4.1x": "l4.1x",
		"p5.4xlarge": "", "ml.g6.xlarge": "",
	} {
		got, ok := awsapi.CapblockType(f, name)
		if got != want || ok != (want != "") {
			t.Errorf("CapblockType(%s) = %s, %v; want %s", name, got, ok, want)
		}
	}
}
