package awsapi

import (
	"crypto/sha256"
	"encoding/hex"

	"slices"
	"sort"
	"strings"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// maxHours bounds the hours a request may name, far above any fleet's
// longest block, so that a duration never overflows.
const maxHours = 1_000_000

func (c *ec2Call) describeCapacityBlockOfferings() (any, error) {
	if c.str("UltraserverType") != "" || c.str("UltraserverCount") != "" {
		return nil, invalidParameter("UltraserverType and UltraserverCount: this fleet sells instances, not UltraServers")
	}
	typeName, err := c.required("InstanceType")
	if err != nil {
		return nil, err
	}
	typ, err := c.instanceType(typeName)
	if err != nil {
		return nil, err
	}
	count, ok, err := c.intParam("InstanceCount", 1, maxHours)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, missingParameter("InstanceCount")
	}
	hours, ok, err := c.intParam("CapacityDurationHours", 1, maxHours)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, missingParameter("CapacityDurationHours")
	}
	maxResults, _, err := c.intParam("MaxResults", 1, 1000)
	if err != nil {
		return nil, err
	}
	startAfter, err := c.timeParam("StartDateRange")
	if err != nil {
		return nil, err
	}
	endBefore, err := c.timeParam("EndDateRange")
	if err != nil {
		return nil, err
	}
	// AWS searches from now to its latest start when no range is given.
	if startAfter.IsZero() {
		startAfter = c.serviceNow()
	}
	if endBefore.IsZero() {
		endBefore = c.serviceNow().Add(c.fleet.Limits.MaxLeadTime + time.Duration(hours)*time.Hour)
	}
	team := contract.TeamOf(c.p, "")
	offerings, err := c.h.svc.Offerings(c.ctx, core.SearchRequest{
		Types: []string{typ}, Count: count, Duration: time.Duration(hours) * time.Hour,
		StartAfter: startAfter, EndBefore: endBefore, MaxResults: maxResults, Team: team,
	})
	if err != nil {
		return nil, err
	}
	out := make([]offeringXML, 0, len(offerings))
	for _, o := range offerings {
		out = append(out, c.offering(o))
	}
	return describeOfferingsResponse{RequestID: c.id, Offerings: setOf(out)}, nil
}

// instanceType is the capblock type an AWS request names.
func (c *ec2Call) instanceType(name string) (string, error) {
	f := c.fleet
	t, ok := CapblockType(f, name)
	if !ok {
		known := make([]string, 0, len(f.Types))
		for _, t := range f.Types {
			known = append(known, AWSName(f, t.Name, ""))
		}
		return "", invalidParameter("instance type %s is not sold here; types: %s", name, strings.Join(known, ", "))
	}
	return t, nil
}

// clientToken is the idempotency key of a purchase of offeringID. AWS's
// PurchaseCapacityBlock carries none, and an SDK retries a call whose
// answer was lost: the same offering then buys the same block, and is
// never bought twice.
func clientToken(offeringID string) string {
	sum := sha256.Sum256([]byte(offeringID))
	return "aws-" + hex.EncodeToString(sum[:12])
}

func (c *ec2Call) purchaseCapacityBlock() (any, error) {
	offeringID, err := c.required("CapacityBlockOfferingId")
	if err != nil {
		return nil, err
	}
	// Every platform is accepted and none is enforced: what runs on the
	// instances is the team's choice.
	if _, err := c.required("InstancePlatform"); err != nil {
		return nil, err
	}
	tags, err := c.tags()
	if err != nil {
		return nil, err
	}
	team := contract.TeamOf(c.p, "")
	b, _, err := c.h.svc.Purchase(c.ctx, contract.PurchaseRequest{
		Team: team, OfferingID: offeringID, ClientToken: clientToken(offeringID),
		Name: tags["Name"], Tags: tags,
	})
	if err != nil {
		return nil, err
	}
	c.subject = b.ID
	return purchaseResponse{RequestID: c.id, Reservation: c.reservation(b), Blocks: setOf([]capacityBlockXML{capacityBlock(b)})}, nil
}

// blocks are the caller's blocks that ids name (all of them when ids is
// empty) and that pass the filters.
func (c *ec2Call) blocks(ids []string, filters []filter) ([]core.Block, error) {
	scope := contract.Scope(c.p)
	var blocks []core.Block
	if len(ids) == 0 {
		all, err := c.h.svc.ListBlocks(c.ctx, scope, "")
		if err != nil {
			return nil, err
		}
		blocks = all
	}
	for _, id := range ids {
		b, err := c.getBlock(id)
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, b)
	}
	for _, f := range filters {
		if err := c.checkFilter(f); err != nil {
			return nil, err
		}
	}
	kept := blocks[:0]
	for _, b := range blocks {
		if c.matches(b, filters) {
			kept = append(kept, b)
		}
	}
	return kept, nil
}

// getBlock is one of the caller's blocks; another team's is not found.
func (c *ec2Call) getBlock(id string) (core.Block, error) {
	b, err := c.h.svc.GetBlock(c.ctx, contract.Scope(c.p), id)
	if err != nil {
		return core.Block{}, c.notFound(err, id)
	}
	return b, nil
}

// notFound is err, or EC2's answer for a reservation not found.
func (c *ec2Call) notFound(err error, id string) error {
	if e := toEC2Error(err, func() *ec2Error { return reservationNotFound(id) }); e != nil {
		return e
	}
	return err
}

// The filters of the Describe actions, by name.
var filterNames = []string{"availability-zone", "capacity-block-id", "capacity-reservation-id", "instance-type", "owner-id", "reservation-type", "state", "tag-key", "tag:<key>"}

func (c *ec2Call) checkFilter(f filter) error {
	if strings.HasPrefix(f.name, "tag:") || slices.Contains(filterNames, f.name) {
		if len(f.values) == 0 {
			return missingParameter("a Value of the filter " + f.name)
		}
		return nil
	}
	return invalidParameter("the filter %q is invalid; filters: %s", f.name, strings.Join(filterNames, ", "))
}

// matches reports whether b passes every filter (any of a filter's
// values matching).
func (c *ec2Call) matches(b core.Block, filters []filter) bool {
	f := c.fleet
	for _, flt := range filters {
		ok := slices.ContainsFunc(flt.values, func(v string) bool {
			switch {
			case flt.name == "availability-zone":
				return v == b.Zone
			case flt.name == "capacity-block-id" || flt.name == "capacity-reservation-id":
				return v == b.ID
			case flt.name == "instance-type":
				t, _ := CapblockType(f, v)
				return t == b.InstanceType
			case flt.name == "owner-id":
				return v == b.Team
			case flt.name == "reservation-type":
				return v == "capacity-block"
			case flt.name == "state":
				return v == string(b.State)
			case flt.name == "tag-key":
				_, has := b.Tags[v]
				return has
			default: // tag:<key>
				tv, has := b.Tags[strings.TrimPrefix(flt.name, "tag:")]
				return has && tv == v
			}
		})
		if !ok {
			return false
		}
	}
	return true
}

func (c *ec2Call) describeCapacityReservations() (any, error) {
	filters, err := c.filters()
	if err != nil {
		return nil, err
	}
	blocks, err := c.blocks(c.list("CapacityReservationId"), filters)
	if err != nil {
		return nil, err
	}
	out := make([]reservationXML, 0, len(blocks))
	for _, b := range blocks {
		out = append(out, c.reservation(b))
	}
	return describeReservationsResponse{RequestID: c.id, Reservations: setOf(out)}, nil
}

func (c *ec2Call) describeCapacityBlocks() (any, error) {
	filters, err := c.filters()
	if err != nil {
		return nil, err
	}
	blocks, err := c.blocks(c.list("CapacityBlockId"), filters)
	if err != nil {
		return nil, err
	}
	out := make([]capacityBlockXML, 0, len(blocks))
	for _, b := range blocks {
		out = append(out, capacityBlock(b))
	}
	return describeBlocksResponse{RequestID: c.id, Blocks: setOf(out)}, nil
}

// describeCapacityBlockStatus answers the blocks named, or, when none
// is, those holding capacity (payment-pending, scheduled, active).
func (c *ec2Call) describeCapacityBlockStatus() (any, error) {
	filters, err := c.filters()
	if err != nil {
		return nil, err
	}
	ids := c.list("CapacityBlockId")
	blocks, err := c.blocks(ids, filters)
	if err != nil {
		return nil, err
	}
	out := make([]blockStatusXML, 0, len(blocks))
	for _, b := range blocks {
		if len(ids) == 0 && !b.State.Live() {
			continue
		}
		st, err := c.h.svc.BlockStatus(c.ctx, contract.Scope(c.p), b.ID)
		if err != nil {
			return nil, c.notFound(err, b.ID)
		}
		out = append(out, blockStatus(b.ID, st))
	}
	return describeStatusResponse{RequestID: c.id, Statuses: setOf(out)}, nil
}

func (c *ec2Call) describeCapacityBlockExtensionOfferings() (any, error) {
	id, err := c.required("CapacityReservationId")
	if err != nil {
		return nil, err
	}
	hours, ok, err := c.intParam("CapacityBlockExtensionDurationHours", 1, maxHours)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, missingParameter("CapacityBlockExtensionDurationHours")
	}
	if _, _, err := c.intParam("MaxResults", 1, 1000); err != nil {
		return nil, err
	}
	b, err := c.getBlock(id)
	if err != nil {
		return nil, err
	}
	offerings, err := c.h.svc.ExtensionOfferings(c.ctx, contract.Scope(c.p), id, time.Duration(hours)*time.Hour)
	if err != nil {
		return nil, c.notFound(err, id)
	}
	out := make([]extensionOfferingXML, 0, len(offerings))
	for _, o := range offerings {
		out = append(out, c.extensionOffering(b, o))
	}
	return describeExtensionOfferingsResponse{RequestID: c.id, Offerings: setOf(out)}, nil
}

func (c *ec2Call) purchaseCapacityBlockExtension() (any, error) {
	id, err := c.required("CapacityReservationId")
	if err != nil {
		return nil, err
	}
	offeringID, err := c.required("CapacityBlockExtensionOfferingId")
	if err != nil {
		return nil, err
	}
	// An unknown id is not found, whatever the offering.
	if _, err := c.getBlock(id); err != nil {
		return nil, err
	}
	// The answer is the extension's own terms and purchase time, not the
	// block's change, so that an SDK's retry of a call whose answer was
	// lost gets the same extension as the first call.
	x, err := c.h.svc.Extend(c.ctx, contract.Scope(c.p), id, offeringID)
	if err != nil {
		return nil, c.notFound(err, id)
	}
	b := x.Block
	ext := extensionXML{
		ReservationID: id, InstanceType: c.awsType(b.InstanceType), InstanceCount: b.Count,
		AvailabilityZone: b.Zone, OfferingID: x.OfferingID,
		DurationHours: int(x.End.Sub(x.Start) / time.Hour), Status: "payment-succeeded",
		PurchaseDate: ec2Time(x.PurchasedAt), StartDate: ec2Time(x.Start), EndDate: ec2Time(x.End),
		UpfrontFee: x.Fee.String(), CurrencyCode: x.Fee.Currency,
	}
	return extensionsResponse{RequestID: c.id, Extensions: setOf([]extensionXML{ext})}, nil
}

// serviceNow is the service's time, which a simulated clock may set.
func (c *ec2Call) serviceNow() time.Time { return c.h.svc.Now() }

// describeCapacityBlockExtensionHistory answers the extensions of the
// caller's blocks from their block.extended events, oldest first.
func (c *ec2Call) describeCapacityBlockExtensionHistory() (any, error) {
	filters, err := c.filters()
	if err != nil {
		return nil, err
	}
	ids := c.list("CapacityReservationId")
	blocks, err := c.blocks(ids, filters)
	if err != nil {
		return nil, err
	}
	byID := map[string]core.Block{}
	for _, b := range blocks {
		byID[b.ID] = b
	}
	out := []extensionXML{}
	scope, cursor := contract.Scope(c.p), ""
	for {
		events, next, err := c.h.svc.Events(c.ctx, scope, cursor, 0)
		if err != nil {
			return nil, err
		}
		if len(events) == 0 {
			break
		}
		cursor = next
		for _, ev := range events {
			b, ok := byID[ev.Subject]
			if ev.Type != core.EventBlockExtended || !ok {
				continue
			}
			out = append(out, c.extension(b, ev))
		}
	}
	return extensionsResponse{RequestID: c.id, Extensions: setOf(out)}, nil
}

// extension is the record of one extension of b, from its event.
func (c *ec2Call) extension(b core.Block, ev core.Event) extensionXML {
	text := func(k string) string { s, _ := ev.Data[k].(string); return s }
	start, _ := time.Parse(time.RFC3339, text("previousEndTime"))
	end, _ := time.Parse(time.RFC3339, text("endTime"))
	currency := text("currency")
	if currency == "" {
		currency = b.Fee.Currency
	}
	return extensionXML{
		ReservationID: b.ID, InstanceType: c.awsType(b.InstanceType), InstanceCount: b.Count,
		AvailabilityZone: b.Zone, OfferingID: text("offeringId"), DurationHours: int(end.Sub(start) / time.Hour),
		Status: "payment-succeeded", PurchaseDate: ec2Time(ev.Time),
		StartDate: ec2Time(start), EndDate: ec2Time(end), UpfrontFee: text("fee"), CurrencyCode: currency,
	}
}

// cancelCapacityReservation cancels a block under capblock's refund
// policy (the fleet's refund percentages), which AWS's
// ApplyCancellationCharges and QuoteId do not change.
func (c *ec2Call) cancelCapacityReservation() (any, error) {
	id, err := c.required("CapacityReservationId")
	if err != nil {
		return nil, err
	}
	if _, err := c.boolParam("ApplyCancellationCharges"); err != nil {
		return nil, err
	}
	if _, err := c.h.svc.CancelBlock(c.ctx, contract.Scope(c.p), id); err != nil {
		return nil, c.notFound(err, id)
	}
	return cancelResponse{RequestID: c.id, Return: true}, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
