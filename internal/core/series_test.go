package core

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestScheduleWindows: occurrences follow the zone's wall time across
// both daylight-saving changes, overnight windows end the next day, and
// bad schedules are refused.
func TestScheduleWindows(t *testing.T) {
	utc := func(s string) time.Time {
		t, err := time.Parse("2006-01-02 15:04", s)
		if err != nil {
			panic(err)
		}
		return t
	}
	tests := map[string]struct {
		sc   Schedule
		want []Window
	}{
		"Madrid into summer time (2027-03-28)": {
			sc: Schedule{Days: []time.Weekday{time.Friday, time.Monday}, StartLocal: "09:00", EndLocal: "17:00",
				TimeZone: "Europe/Madrid", From: "2027-03-26", To: "2027-03-29"},
			want: []Window{{utc("2027-03-26 08:00"), utc("2027-03-26 16:00")}, {utc("2027-03-29 07:00"), utc("2027-03-29 15:00")}},
		},
		"Madrid back to winter time (2027-10-31)": {
			sc: Schedule{Days: []time.Weekday{time.Friday, time.Monday}, StartLocal: "09:00", EndLocal: "17:00",
				TimeZone: "Europe/Madrid", From: "2027-10-29", To: "2027-11-01"},
			want: []Window{{utc("2027-10-29 07:00"), utc("2027-10-29 15:00")}, {utc("2027-11-01 08:00"), utc("2027-11-01 16:00")}},
		},
		"overnight in New York": {
			sc: Schedule{Days: []time.Weekday{time.Saturday}, StartLocal: "22:00", EndLocal: "06:00",
				TimeZone: "America/New_York", From: "2027-01-02", To: "2027-01-08"},
			want: []Window{{utc("2027-01-03 03:00"), utc("2027-01-03 11:00")}},
		},
		"the night the clocks go back lasts an hour more": {
			sc: Schedule{Days: []time.Weekday{time.Saturday}, StartLocal: "22:00", EndLocal: "06:00",
				TimeZone: "Europe/Madrid", From: "2027-10-30", To: "2027-10-30"},
			want: []Window{{utc("2027-10-30 20:00"), utc("2027-10-31 05:00")}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := tc.sc.Windows()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("windows (-want +got):\n%s", diff)
			}
		})
	}
	good := Schedule{Days: []time.Weekday{time.Monday}, StartLocal: "09:00", EndLocal: "17:00", TimeZone: "UTC", From: "2027-01-04", To: "2027-01-04"}
	for name, mod := range map[string]func(*Schedule){
		"unknown zone":   func(s *Schedule) { s.TimeZone = "Mars/Olympus" },
		"local zone":     func(s *Schedule) { s.TimeZone = "Local" },
		"no zone":        func(s *Schedule) { s.TimeZone = "" },
		"bad start":      func(s *Schedule) { s.StartLocal = "25:00" },
		"bad end":        func(s *Schedule) { s.EndLocal = "5pm" },
		"bad from":       func(s *Schedule) { s.From = "04/01/2027" },
		"to before from": func(s *Schedule) { s.To = "2027-01-03" },
		"no days":        func(s *Schedule) { s.Days = nil },
		"no day matches": func(s *Schedule) { s.Days = []time.Weekday{time.Tuesday} },
		"too many":       func(s *Schedule) { s.Days = []time.Weekday{0, 1, 2, 3, 4, 5, 6}; s.To = "2028-01-04" },
	} {
		sc := good
		mod(&sc)
		if _, err := sc.Windows(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid argument", name, err)
		}
	}
}

func TestParseDays(t *testing.T) {
	got, err := ParseDays([]string{"weekdays", "Sunday", "mon"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"sun", "mon", "tue", "wed", "thu", "fri"}, DayNames(got)); diff != "" {
		t.Errorf("days (-want +got):\n%s", diff)
	}
	for _, bad := range [][]string{nil, {"funday"}, {""}} {
		if _, err := ParseDays(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ParseDays(%q): %v", bad, err)
		}
	}
}

func sampleSeriesOffering(now time.Time) SeriesOffering {
	usd := func(m int64) Money { return Money{Minor: m, Currency: "USD"} }
	day := now.Add(48 * time.Hour)
	return SeriesOffering{InstanceType: "l4.1x", Count: 4, Zone: "z", ExpiresAt: now.Add(10 * time.Minute),
		Schedule: Schedule{Days: []time.Weekday{time.Monday, time.Wednesday}, StartLocal: "09:00", EndLocal: "17:00",
			TimeZone: "Europe/Madrid", From: "2027-03-22", To: "2027-03-31"},
		Occurrences: []SeriesOccurrence{
			{Start: day, End: day.Add(8 * time.Hour), Fits: true, Fee: usd(2304), OnDemandFee: usd(3200)},
			{Start: day.Add(48 * time.Hour), End: day.Add(56 * time.Hour), Reason: "no capacity"},
			{Start: day.Add(7 * 24 * time.Hour), End: day.Add(7*24*time.Hour + 8*time.Hour), Fits: true, Fee: usd(2240), OnDemandFee: usd(3200)},
		}}
}

// TestSeriesOfferingRoundTrip: a signed series quote carries the
// occurrences it buys (those that fit) and its schedule; a tampered,
// foreign-kind or expired id is refused.
func TestSeriesOfferingRoundTrip(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	now := time.Date(2027, 3, 15, 0, 0, 0, 0, time.UTC)
	o := sampleSeriesOffering(now)
	o.Sign(secret)
	if !strings.HasPrefix(o.ID, KindSeries+"-") {
		t.Fatalf("id %q", o.ID)
	}
	got, err := VerifySeriesOffering(secret, o.ID, now)
	if err != nil {
		t.Fatal(err)
	}
	want := o
	want.Occurrences = o.Bought()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("verified offering (-want +got):\n%s", diff)
	}
	if got.Fee().Minor != 2304+2240 {
		t.Errorf("fee %d", got.Fee().Minor)
	}
	if exp, err := OfferingExpiry(o.ID); err != nil || !exp.Equal(o.ExpiresAt) {
		t.Errorf("OfferingExpiry: %s, %v", exp, err)
	}
	tampered := []byte(o.ID)
	tampered[10] ^= 1
	for name, id := range map[string]string{
		"tampered": string(tampered),
		"other secret": func() string {
			c := sampleSeriesOffering(now)
			c.Sign([]byte("another secret, 32 bytes long..."))
			return c.ID
		}(),
		"plan kind": KindPlan + strings.TrimPrefix(o.ID, KindSeries),
	} {
		if _, err := VerifySeriesOffering(secret, id, now); !errors.Is(err, ErrOfferingInvalid) {
			t.Errorf("%s: %v, want offering invalid", name, err)
		}
	}
	if _, err := VerifySeriesOffering(secret, o.ID, o.ExpiresAt); !errors.Is(err, ErrOfferingExpired) {
		t.Errorf("at expiry: %v", err)
	}
	none := sampleSeriesOffering(now)
	for i := range none.Occurrences {
		none.Occurrences[i].Fits = false
	}
	if none.Sign(secret); none.ID != "" {
		t.Errorf("a quote with nothing to buy was signed")
	}
}
