package core

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPriceCalendar(t *testing.T) {
	// n1..n3 are booked over hours [3, 6): three whole nodes are free
	// only where a 2-hour block avoids them.
	busy := makeBlock("busy").whole("n1", "n2").hours(3, 6).obj()
	ix := newTestIndex(t, busy)
	now := at(0)
	req := SearchRequest{Types: []string{"h100.8x"}, Count: 3, Duration: 2 * time.Hour, StartAfter: at(1), EndBefore: at(9)}
	got, err := ix.PriceCalendar(req, now)
	if err != nil {
		t.Fatal(err)
	}
	var avail []bool
	var starts []int
	for _, s := range got {
		avail = append(avail, s.Available)
		starts = append(starts, int(s.Start.Sub(indexNow)/time.Hour))
	}
	if diff := cmp.Diff([]int{1, 2, 3, 4, 5, 6, 7}, starts); diff != "" {
		t.Errorf("starts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]bool{true, false, false, false, false, true, true}, avail); diff != "" {
		t.Errorf("available (-want +got):\n%s", diff)
	}
	// Each available start is priced as Search prices that start alone.
	for _, s := range got {
		if !s.Available {
			continue
		}
		one := req
		one.StartAfter, one.EndBefore = s.Start, s.Start.Add(2*time.Hour)
		offers, err := ix.Search(one, now)
		if err != nil || len(offers) == 0 {
			t.Fatalf("Search at %s = %v, %v; want one offering", s.Start, offers, err)
		}
		if offers[0].Fee != s.Fee || offers[0].OnDemandFee != s.OnDemandFee || offers[0].Zone != s.Zone {
			t.Errorf("at %s: calendar %v/%v in %s, search %v/%v in %s", s.Start, s.Fee, s.OnDemandFee, s.Zone, offers[0].Fee, offers[0].OnDemandFee, offers[0].Zone)
		}
	}
}

func TestPriceCalendarFractional(t *testing.T) {
	// Every GPU but one of n1..n4 is booked over [2, 4): 2 single GPUs fit
	// only outside it.
	var bs []Block
	for i, n := range []string{"n1", "n2", "n3", "n4"} {
		hi := 8
		if i == 0 {
			hi = 7
		}
		bs = append(bs, makeBlock("b"+n).on(n, gpus(0, hi)...).hours(2, 4).obj())
	}
	ix := newTestIndex(t, bs...)
	got, err := ix.PriceCalendar(SearchRequest{Types: []string{"h100.1x"}, Count: 2, Duration: time.Hour, StartAfter: at(1), EndBefore: at(5)}, at(0))
	if err != nil {
		t.Fatal(err)
	}
	var avail []bool
	for _, s := range got {
		avail = append(avail, s.Available)
	}
	if diff := cmp.Diff([]bool{true, false, false, true}, avail); diff != "" {
		t.Errorf("available (-want +got):\n%s", diff)
	}
}

func TestPriceCalendarRefuses(t *testing.T) {
	ix := newTestIndex(t)
	base := SearchRequest{Types: []string{"h100.8x"}, Count: 1, Duration: 2 * time.Hour, StartAfter: at(1), EndBefore: at(9)}
	tests := map[string]func(r *SearchRequest){
		"two types":     func(r *SearchRequest) { r.Types = []string{"h100.8x", "h100.1x"} },
		"a range":       func(r *SearchRequest) { r.Duration, r.MinDuration, r.MaxDuration = 0, time.Hour, 2*time.Hour },
		"unknown type":  func(r *SearchRequest) { r.Types = []string{"nope"} },
		"no count":      func(r *SearchRequest) { r.Count = 0 },
		"window behind": func(r *SearchRequest) { r.StartAfter, r.EndBefore = at(-9), at(-8) },
	}
	for name, change := range tests {
		t.Run(name, func(t *testing.T) {
			r := base
			change(&r)
			if _, err := ix.PriceCalendar(r, at(0)); err == nil {
				t.Error("no error, want invalid")
			}
		})
	}
}

func TestPriceCalendarHeldQuota(t *testing.T) {
	// Team t1 holds 2 whole nodes over [3, 6) and may hold 3 instances at
	// once: a 2-instance block overlapping those hours is beyond it.
	held := makeBlock("held").whole("n1", "n2").hours(3, 6).obj()
	ix := newTestIndex(t, held)
	req := SearchRequest{Types: []string{"h100.8x"}, Count: 2, Duration: 2 * time.Hour, StartAfter: at(1), EndBefore: at(9),
		Team: "t1", Quotas: map[string]Quota{"h100.8x": {Team: "t1", MaxInstancesHeld: 3}}}
	got, err := ix.PriceCalendar(req, at(0))
	if err != nil {
		t.Fatal(err)
	}
	var avail []bool
	for _, s := range got {
		avail = append(avail, s.Available)
	}
	if diff := cmp.Diff([]bool{true, false, false, false, false, true, true}, avail); diff != "" {
		t.Errorf("available (-want +got):\n%s", diff)
	}
}
