package core

import (
	"fmt"
	"time"
)

// PlaceExtension decides whether block b can run until newEnd. The block
// keeps its GPUs when they are free after its end; otherwise, for a
// whole-node block, tentative blocks of its pool are re-packed around it
// (and it moves too when it is tentative itself). Placements in the plan
// are the block's placements afterwards.
//
// b must be the indexed version of the block: a block the index no
// longer holds (cancelled meanwhile) or holds at another version (changed
// meanwhile) is ErrConflict, so that the caller reads it again.
func (ix *Index) PlaceExtension(b Block, newEnd time.Time, now time.Time) (PlacementPlan, error) {
	cur, ok := ix.blocks[b.ID]
	if !ok || cur.Version != b.Version {
		return PlacementPlan{}, fmt.Errorf("%w: block %s changed since it was read", ErrConflict, b.ID)
	}
	s, e := ix.hourOf(b.End), ix.hourOf(newEnd)
	ix.grow(e)
	nope := fmt.Errorf("%w: the GPUs of block %s are not free from %s to %s", ErrNoCapacity, b.ID,
		b.End.Format(time.RFC3339), newEnd.Format(time.RFC3339))
	// 1. Its own GPUs, free after its end?
	free := true
	for _, pl := range b.Placements {
		ni, ok := ix.nodeIdx[pl.Node]
		if !ok {
			return PlacementPlan{}, fmt.Errorf("block %s: unknown node %s", b.ID, pl.Node)
		}
		want := maskOf(pl.GPUs)
		if ix.freeMask(ni, s, e, map[string]bool{b.ID: true})&want != want {
			free = false
			break
		}
	}
	if free {
		return PlacementPlan{Placements: b.Placements}, nil
	}
	// 2. Re-pack tentative whole-node blocks around it.
	t, ok := ix.Fleet.Type(b.InstanceType)
	if !ok || len(b.Placements) == 0 {
		return PlacementPlan{}, nope
	}
	ni := ix.nodeIdx[b.Placements[0].Node]
	p := ix.nodes[ni].pool
	if t.GPUsPerInstance != p.gpus {
		return PlacementPlan{}, nope
	}
	if b.Movable(now, ix.Fleet.Limits) {
		// It is one of the tentative blocks: re-pack it with its new end.
		ext := *cur
		ext.End = newEnd
		ix.blocks[b.ID] = &ext
		defer func() { ix.blocks[b.ID] = cur }()
		plan, ok := ix.repack(p, repackItem{count: 0, s: s, e: e}, now)
		if !ok {
			return PlacementPlan{}, nope
		}
		return splitOwn(plan, b), nil
	}
	extra := map[int][]alloc{}
	for _, pl := range b.Placements {
		n := ix.nodeIdx[pl.Node]
		extra[n] = append(extra[n], alloc{block: b.ID, mask: maskOf(pl.GPUs), start: s, end: e})
	}
	plan, ok := ix.repack(p, repackItem{count: 0, s: s, e: e}, now, extra)
	if !ok {
		return PlacementPlan{}, nope
	}
	plan.Placements = b.Placements
	return plan, nil
}

// splitOwn separates the extended block's own new placement from the
// moves of the other blocks.
func splitOwn(plan PlacementPlan, b Block) PlacementPlan {
	out := PlacementPlan{Placements: b.Placements}
	for _, m := range plan.Moves {
		if m.ID == b.ID {
			out.Placements = m.Placements
			continue
		}
		out.Moves = append(out.Moves, m)
	}
	return out
}

func maskOf(gpus []int) uint64 {
	var m uint64
	for _, g := range gpus {
		m |= 1 << g
	}
	return m
}

// ExtensionOffer prices an extension of block b by d at now, unsigned.
func (ix *Index) ExtensionOffer(b Block, d time.Duration, now time.Time) (Offering, error) {
	l := ix.Fleet.Limits
	if err := CheckExtension(b, d, now, l); err != nil {
		return Offering{}, err
	}
	t, ok := ix.Fleet.Type(b.InstanceType)
	if !ok {
		return Offering{}, fmt.Errorf("block %s: unknown instance type %s", b.ID, b.InstanceType)
	}
	newEnd := b.End.Add(d)
	if _, err := ix.PlaceExtension(b, newEnd, now); err != nil {
		return Offering{}, err
	}
	hours := int(d / time.Hour)
	s, e := ix.hourOf(b.End), ix.hourOf(newEnd)
	ni := ix.nodeIdx[b.Placements[0].Node]
	p := ix.nodes[ni].pool
	prefix := p.usedPrefix(e, nil)
	booked := (prefix[e] - prefix[s]) * 10000 / (int64(len(p.nodes)) * int64(p.gpus) * int64(max(e-s, 1)))
	lead := int64(b.End.Sub(now) / time.Hour)
	factor := ix.Fleet.Pricing.Factor(booked, lead, int64(l.MaxLeadTime/time.Hour))
	return Offering{
		Kind: KindExtension, BlockID: b.ID, InstanceType: b.InstanceType, Count: b.Count, Zone: b.Zone,
		Start: b.End, End: newEnd,
		Fee:         ix.Fleet.Pricing.Fee(t.OnDemand, factor, hours, b.Count),
		OnDemandFee: OnDemandFee(t.OnDemand, hours, b.Count),
		ExpiresAt:   now.Add(l.OfferingTTL),
	}, nil
}
