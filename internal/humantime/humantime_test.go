package humantime

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseDuration(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		"hours":              {in: "48h", want: 48 * time.Hour},
		"days":               {in: "3d", want: 72 * time.Hour},
		"weeks":              {in: "2w", want: 336 * time.Hour},
		"minutes":            {in: "90m", want: 90 * time.Minute},
		"seconds":            {in: "45s", want: 45 * time.Second},
		"days and hours":     {in: "1d12h", want: 36 * time.Hour},
		"weeks and days":     {in: "1w2d", want: 9 * Day},
		"any order":          {in: "12h1d", want: 36 * time.Hour},
		"go syntax":          {in: "1h30m", want: 90 * time.Minute},
		"go fraction":        {in: "1.5h", want: 90 * time.Minute},
		"go milliseconds":    {in: "1500ms", want: 1500 * time.Millisecond},
		"not rounded":        {in: "1h1s", want: time.Hour + time.Second},
		"zero":               {in: "0", want: 0},
		"empty":              {in: "", wantErr: true},
		"no unit":            {in: "48", wantErr: true},
		"no number":          {in: "h", wantErr: true},
		"unknown unit":       {in: "3y", wantErr: true},
		"negative":           {in: "-1h", wantErr: true},
		"repeated unit":      {in: "1d1d", wantErr: true},
		"space":              {in: "1d 12h", wantErr: true},
		"words":              {in: "two days", wantErr: true},
		"overflow":           {in: "99999999999w", wantErr: true},
		"fraction of a day":  {in: "1.5d", wantErr: true},
		"trailing garbage":   {in: "3dx", wantErr: true},
		"capital unit":       {in: "3D", wantErr: true},
		"plus sign rejected": {in: "+3d", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseDuration(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseDuration(%q) = %v, want an error", tc.in, got)
				}
				if !errors.Is(err, ErrSyntax) {
					t.Errorf("ParseDuration(%q) error %v does not wrap ErrSyntax", tc.in, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseDuration(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Errorf("ParseDuration(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 11, 20, 15, 42, 7, 0, time.UTC)
	tests := map[string]struct {
		in      string
		now     time.Time
		want    time.Time
		wantErr bool
	}{
		"now":              {in: "now", want: now},
		"now is UTC":       {in: "now", now: now.In(time.FixedZone("X", 3600)), want: now},
		"today":            {in: "today", want: time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)},
		"tomorrow":         {in: "tomorrow", want: time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)},
		"Tomorrow":         {in: "Tomorrow", want: time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)},
		"yesterday":        {in: "yesterday", want: time.Date(2026, 11, 19, 0, 0, 0, 0, time.UTC)},
		"tomorrow at EOM":  {in: "tomorrow", now: time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC), want: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		"tomorrow in UTC":  {in: "tomorrow", now: time.Date(2026, 11, 21, 0, 30, 0, 0, time.FixedZone("CET", 3600)), want: time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC).AddDate(0, 0, 1)},
		"plus days":        {in: "+14d", want: now.Add(14 * Day)},
		"plus hours":       {in: "+6h", want: now.Add(6 * time.Hour)},
		"plus mixed":       {in: "+1d12h", want: now.Add(36 * time.Hour)},
		"minus hours":      {in: "-2h", want: now.Add(-2 * time.Hour)},
		"date":             {in: "2026-12-01", want: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		"date and minute":  {in: "2026-12-01T10:00", want: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)},
		"date space time":  {in: "2026-12-01 10:30", want: time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)},
		"rfc3339 utc":      {in: "2026-12-01T10:00:00Z", want: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)},
		"rfc3339 offset":   {in: "2026-12-01T10:00:00+02:00", want: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)},
		"rfc3339 fraction": {in: "2026-12-01T10:00:00.5Z", want: time.Date(2026, 12, 1, 10, 0, 0, 5e8, time.UTC)},
		"empty":            {in: "", wantErr: true},
		"bad word":         {in: "soon", wantErr: true},
		"bad relative":     {in: "+14", wantErr: true},
		"bare plus":        {in: "+", wantErr: true},
		"bad date":         {in: "2026-13-01", wantErr: true},
		"us date":          {in: "12/01/2026", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := tc.now
			if n.IsZero() {
				n = now
			}
			got, err := ParseTime(tc.in, n)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseTime(%q) = %v, want an error", tc.in, got)
				}
				if !errors.Is(err, ErrSyntax) {
					t.Errorf("ParseTime(%q) error %v does not wrap ErrSyntax", tc.in, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTime(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseTime(%q) mismatch (-want +got):\n%s", tc.in, diff)
			}
			if got.Location() != time.UTC {
				t.Errorf("ParseTime(%q) location = %v, want UTC", tc.in, got.Location())
			}
		})
	}
}

func TestFormatDuration(t *testing.T) {
	tests := map[time.Duration]string{
		0:                            "0s",
		90 * time.Minute:             "1h30m",
		36 * time.Hour:               "1d12h",
		2 * Week:                     "2w",
		182 * Day:                    "26w",
		Week + Day + time.Hour + 1e9: "1w1d1h1s",
		1500 * time.Millisecond:      "1.5s",
		-time.Hour:                   "-1h0m0s",
	}
	for d, want := range tests {
		got := FormatDuration(d)
		if got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
		if d >= 0 && d%time.Second == 0 {
			back, err := ParseDuration(got)
			if err != nil || back != d {
				t.Errorf("ParseDuration(FormatDuration(%v)) = %v, %v; want the same duration", d, back, err)
			}
		}
	}
}

func TestErrorsSayHowToWriteIt(t *testing.T) {
	_, err := ParseDuration("two days")
	if got, want := err.Error(), `"two days" is not a duration; write it like 48h, 3d, 2w, 90m or 1d12h`; got != want {
		t.Errorf("ParseDuration error = %q, want %q", got, want)
	}
	_, err = ParseTime("+14", time.Time{})
	if got, want := err.Error(), `"+14" is not a relative date; write it like +14d, +6h or +1d12h`; got != want {
		t.Errorf("ParseTime error = %q, want %q", got, want)
	}
}
