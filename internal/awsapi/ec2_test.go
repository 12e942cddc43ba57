package awsapi_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"capblock/internal/awsapi"
)

// apiCode is the error code of an SDK call's error ("" when none).
func apiCode(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("not an API error: %v", err)
	}
	return ae.ErrorCode()
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := apiCode(t, err); got != code {
		t.Fatalf("%s: error code %q (%v), want %q", what, got, err, code)
	}
}

// searchH100 asks for count p5.48xlarge (h100.8x) for hours, starting
// in [from, to-hours].
func searchH100(ctx context.Context, c *ec2.Client, count, hours int32, from, to time.Time) (*ec2.DescribeCapacityBlockOfferingsOutput, error) {
	return c.DescribeCapacityBlockOfferings(ctx, &ec2.DescribeCapacityBlockOfferingsInput{
		InstanceType: aws.String("p5.48xlarge"), InstanceCount: aws.Int32(count),
		CapacityDurationHours: aws.Int32(hours), StartDateRange: aws.Time(from), EndDateRange: aws.Time(to),
	})
}

// TestEC2CapacityBlockLifecycle drives every EC2 action with the real
// SDK: search, buy (twice, as a retry: one block), describe the
// reservation, the block and its status, extend and read the history,
// cancel.
func TestEC2CapacityBlockLifecycle(t *testing.T) {
	e := newEnv(t, awsapi.Options{})
	ctx := context.Background()
	c := e.ec2(memberKey)
	from, to := t0.Add(24*time.Hour), t0.Add(72*time.Hour)

	// 1. Offerings, in AWS's names and shapes.
	offs, err := searchH100(ctx, c, 2, 24, from, to)
	if err != nil {
		t.Fatal(err)
	}
	// The SDK given the endpoint <server>/aws posts to /aws itself.
	if path := <-e.paths; path != "/aws" {
		t.Errorf("the SDK posted to %q, want /aws", path)
	}
	if len(offs.CapacityBlockOfferings) == 0 {
		t.Fatal("no offerings")
	}
	o := offs.CapacityBlockOfferings[0]
	if aws.ToString(o.InstanceType) != "p5.48xlarge" || aws.ToInt32(o.InstanceCount) != 2 || aws.ToInt32(o.CapacityBlockDurationHours) != 24 ||
		o.StartDate.Before(from) || o.EndDate.After(to) || o.EndDate.Sub(*o.StartDate) != 24*time.Hour ||
		aws.ToString(o.CurrencyCode) != "USD" || aws.ToString(o.UpfrontFee) == "" || o.Tenancy != types.CapacityReservationTenancyDefault {
		t.Errorf("offering %+v", o)
	}
	if !strings.HasPrefix(aws.ToString(o.AvailabilityZone), "zone-") {
		t.Errorf("zone %q, want capblock's zone names", aws.ToString(o.AvailabilityZone))
	}
	// capblock's own name is accepted too.
	own, err := c.DescribeCapacityBlockOfferings(ctx, &ec2.DescribeCapacityBlockOfferingsInput{
		InstanceType: aws.String("h100.8x"), InstanceCount: aws.Int32(1), CapacityDurationHours: aws.Int32(3),
	})
	if err != nil || len(own.CapacityBlockOfferings) == 0 || aws.ToString(own.CapacityBlockOfferings[0].InstanceType) != "p5.48xlarge" {
		t.Fatalf("search by capblock's name: %v %+v", err, own)
	}

	// 2. Purchase; the SDK's retry of the same call buys nothing more.
	buy := &ec2.PurchaseCapacityBlockInput{
		CapacityBlockOfferingId: o.CapacityBlockOfferingId, InstancePlatform: types.CapacityReservationInstancePlatformLinuxUnix,
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeCapacityReservation,
			Tags: []types.Tag{{Key: aws.String("Name"), Value: aws.String("pretrain")}, {Key: aws.String("project"), Value: aws.String("llm")}}}},
	}
	bought, err := c.PurchaseCapacityBlock(ctx, buy)
	if err != nil {
		t.Fatal(err)
	}
	r := bought.CapacityReservation
	id := aws.ToString(r.CapacityReservationId)
	if !strings.HasPrefix(id, "cb-") || r.ReservationType != types.CapacityReservationTypeCapacityBlock ||
		r.State != types.CapacityReservationStateScheduled || aws.ToInt32(r.TotalInstanceCount) != 2 ||
		aws.ToString(r.InstanceType) != "p5.48xlarge" || !r.StartDate.Equal(*o.StartDate) || !r.EndDate.Equal(*o.EndDate) ||
		aws.ToString(r.CapacityBlockId) != id || aws.ToString(r.OwnerId) != e.alpha.ID {
		t.Errorf("reservation %+v", r)
	}
	if len(bought.CapacityBlocks) != 1 || aws.ToString(bought.CapacityBlocks[0].CapacityBlockId) != id ||
		!cmp.Equal(bought.CapacityBlocks[0].CapacityReservationIds, []string{id}) {
		t.Errorf("capacity blocks %+v", bought.CapacityBlocks)
	}
	again, err := c.PurchaseCapacityBlock(ctx, buy)
	if err != nil || aws.ToString(again.CapacityReservation.CapacityReservationId) != id {
		t.Fatalf("the same purchase again: %v, %+v; want block %s", err, again, id)
	}
	blocks, err := e.svc.ListBlocks(ctx, e.alpha.ID, "")
	if err != nil || len(blocks) != 1 {
		t.Fatalf("alpha holds %d blocks (%v), want 1", len(blocks), err)
	}

	// 3. Describe: the reservation, with its tags; filters.
	res, err := c.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.CapacityReservations) != 1 {
		t.Fatalf("reservations %+v", res.CapacityReservations)
	}
	wantTags := []types.Tag{{Key: aws.String("Name"), Value: aws.String("pretrain")}, {Key: aws.String("project"), Value: aws.String("llm")}}
	if diff := cmp.Diff(wantTags, res.CapacityReservations[0].Tags, cmp.AllowUnexported(types.Tag{})); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}
	for filter, want := range map[string]int{"p5.48xlarge": 1, "h100.8x": 1, "p4d.24xlarge": 0} {
		res, err := c.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{
			Filters: []types.Filter{{Name: aws.String("instance-type"), Values: []string{filter}}, {Name: aws.String("tag:project"), Values: []string{"llm"}}},
		})
		if err != nil || len(res.CapacityReservations) != want {
			t.Errorf("instance-type %s: %v, %d reservations, want %d", filter, err, len(res.CapacityReservations), want)
		}
	}
	_, err = c.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{
		Filters: []types.Filter{{Name: aws.String("instance-platform"), Values: []string{"Linux/UNIX"}}},
	})
	wantCode(t, "unknown filter", err, "InvalidParameterValue")

	cbs, err := c.DescribeCapacityBlocks(ctx, &ec2.DescribeCapacityBlocksInput{})
	if err != nil || len(cbs.CapacityBlocks) != 1 || aws.ToString(cbs.CapacityBlocks[0].CapacityBlockId) != id ||
		cbs.CapacityBlocks[0].State != types.CapacityBlockResourceStateScheduled {
		t.Fatalf("capacity blocks: %v %+v", err, cbs)
	}
	st, err := c.DescribeCapacityBlockStatus(ctx, &ec2.DescribeCapacityBlockStatusInput{CapacityBlockIds: []string{id}})
	if err != nil || len(st.CapacityBlockStatuses) != 1 {
		t.Fatalf("status: %v %+v", err, st)
	}
	if s := st.CapacityBlockStatuses[0]; aws.ToInt32(s.TotalCapacity) != 2 || s.InterconnectStatus != types.CapacityBlockInterconnectStatusOk ||
		len(s.CapacityReservationStatuses) != 1 || aws.ToString(s.CapacityReservationStatuses[0].CapacityReservationId) != id {
		t.Errorf("status %+v", s)
	}

	// 4. Extend by 5 hours (capblock's hours, not AWS's days).
	exts, err := c.DescribeCapacityBlockExtensionOfferings(ctx, &ec2.DescribeCapacityBlockExtensionOfferingsInput{
		CapacityReservationId: aws.String(id), CapacityBlockExtensionDurationHours: aws.Int32(5),
	})
	if err != nil || len(exts.CapacityBlockExtensionOfferings) != 1 {
		t.Fatalf("extension offerings: %v %+v", err, exts)
	}
	x := exts.CapacityBlockExtensionOfferings[0]
	if !x.CapacityBlockExtensionStartDate.Equal(*r.EndDate) || aws.ToInt32(x.CapacityBlockExtensionDurationHours) != 5 ||
		!x.CapacityBlockExtensionEndDate.Equal(r.EndDate.Add(5*time.Hour)) || aws.ToString(x.InstanceType) != "p5.48xlarge" {
		t.Errorf("extension offering %+v", x)
	}
	extended, err := c.PurchaseCapacityBlockExtension(ctx, &ec2.PurchaseCapacityBlockExtensionInput{
		CapacityReservationId: aws.String(id), CapacityBlockExtensionOfferingId: x.CapacityBlockExtensionOfferingId,
	})
	if err != nil || len(extended.CapacityBlockExtensions) != 1 {
		t.Fatalf("extend: %v %+v", err, extended)
	}
	if got := extended.CapacityBlockExtensions[0]; got.CapacityBlockExtensionStatus != types.CapacityBlockExtensionStatusPaymentSucceeded ||
		aws.ToString(got.UpfrontFee) != aws.ToString(x.UpfrontFee) || !got.CapacityBlockExtensionEndDate.Equal(*x.CapacityBlockExtensionEndDate) {
		t.Errorf("extension %+v, offered %+v", got, x)
	}
	hist, err := c.DescribeCapacityBlockExtensionHistory(ctx, &ec2.DescribeCapacityBlockExtensionHistoryInput{CapacityReservationIds: []string{id}})
	if err != nil || len(hist.CapacityBlockExtensions) != 1 {
		t.Fatalf("history: %v %+v", err, hist)
	}
	if h := hist.CapacityBlockExtensions[0]; aws.ToInt32(h.CapacityBlockExtensionDurationHours) != 5 || aws.ToString(h.UpfrontFee) != aws.ToString(x.UpfrontFee) ||
		aws.ToString(h.CapacityBlockExtensionOfferingId) != aws.ToString(x.CapacityBlockExtensionOfferingId) || !h.CapacityBlockExtensionPurchaseDate.Equal(t0) {
		t.Errorf("history %+v", h)
	}

	// 5. Cancel, under capblock's refund policy (all of it before start).
	cancelled, err := c.CancelCapacityReservation(ctx, &ec2.CancelCapacityReservationInput{CapacityReservationId: aws.String(id)})
	if err != nil || !aws.ToBool(cancelled.Return) {
		t.Fatalf("cancel: %v %+v", err, cancelled)
	}
	res, err = c.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{id}})
	if err != nil || res.CapacityReservations[0].State != types.CapacityReservationStateCancelled {
		t.Fatalf("after cancel: %v %+v", err, res)
	}
	ledger, err := e.svc.Ledger(ctx, "", e.alpha.ID)
	if err != nil || ledger.Spent.Minor != 0 {
		t.Errorf("alpha's spend after cancelling before start: %v %+v, want 0", err, ledger.Spent)
	}
	_, err = c.CancelCapacityReservation(ctx, &ec2.CancelCapacityReservationInput{CapacityReservationId: aws.String(id)})
	wantCode(t, "cancelling twice", err, "IncorrectState")
}

// TestEC2ExtendAgain: the SDK's retry of PurchaseCapacityBlockExtension
// whose answer was lost answers the same extension, and the block is
// extended and charged once; another team's retry finds no reservation.
func TestEC2ExtendAgain(t *testing.T) {
	e := newEnv(t, awsapi.Options{})
	ctx := context.Background()
	c := e.ec2(memberKey)
	offs, err := searchH100(ctx, c, 1, 3, t0.Add(24*time.Hour), t0.Add(72*time.Hour))
	if err != nil || len(offs.CapacityBlockOfferings) == 0 {
		t.Fatalf("search: %v %+v", err, offs)
	}
	bought, err := c.PurchaseCapacityBlock(ctx, &ec2.PurchaseCapacityBlockInput{
		CapacityBlockOfferingId: offs.CapacityBlockOfferings[0].CapacityBlockOfferingId, InstancePlatform: types.CapacityReservationInstancePlatformLinuxUnix,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := bought.CapacityReservation
	id := aws.ToString(r.CapacityReservationId)
	exts, err := c.DescribeCapacityBlockExtensionOfferings(ctx, &ec2.DescribeCapacityBlockExtensionOfferingsInput{
		CapacityReservationId: aws.String(id), CapacityBlockExtensionDurationHours: aws.Int32(2),
	})
	if err != nil || len(exts.CapacityBlockExtensionOfferings) != 1 {
		t.Fatalf("extension offerings: %v %+v", err, exts)
	}
	x := exts.CapacityBlockExtensionOfferings[0]
	extend := &ec2.PurchaseCapacityBlockExtensionInput{CapacityReservationId: aws.String(id), CapacityBlockExtensionOfferingId: x.CapacityBlockExtensionOfferingId}
	first, err := c.PurchaseCapacityBlockExtension(ctx, extend)
	if err != nil || len(first.CapacityBlockExtensions) != 1 {
		t.Fatalf("extend: %v %+v", err, first)
	}
	want := types.CapacityBlockExtension{
		CapacityReservationId: aws.String(id), InstanceType: aws.String("p5.48xlarge"), InstanceCount: aws.Int32(1),
		AvailabilityZone: r.AvailabilityZone, CapacityBlockExtensionOfferingId: x.CapacityBlockExtensionOfferingId,
		CapacityBlockExtensionDurationHours: aws.Int32(2), CapacityBlockExtensionStatus: types.CapacityBlockExtensionStatusPaymentSucceeded,
		CapacityBlockExtensionPurchaseDate: aws.Time(t0), CapacityBlockExtensionStartDate: r.EndDate,
		CapacityBlockExtensionEndDate: x.CapacityBlockExtensionEndDate, UpfrontFee: x.UpfrontFee, CurrencyCode: x.CurrencyCode,
	}
	ignore := cmpopts.IgnoreUnexported(types.CapacityBlockExtension{})
	if diff := cmp.Diff(want, first.CapacityBlockExtensions[0], ignore); diff != "" {
		t.Errorf("the extension (-want +got):\n%s", diff)
	}

	// A retry at once, and one once the clock moved on (the quote
	// expired): each answers the same.
	for _, wait := range []time.Duration{0, 30 * time.Minute} {
		if _, err := e.sim.Advance(wait); err != nil {
			t.Fatal(err)
		}
		again, err := c.PurchaseCapacityBlockExtension(ctx, extend)
		if err != nil || len(again.CapacityBlockExtensions) != 1 {
			t.Fatalf("the same extension again %s later: %v %+v", wait, err, again)
		}
		if diff := cmp.Diff(first.CapacityBlockExtensions, again.CapacityBlockExtensions, ignore); diff != "" {
			t.Errorf("the same extension again %s later (-first +again):\n%s", wait, diff)
		}
	}
	_, err = e.ec2(betaKey).PurchaseCapacityBlockExtension(ctx, extend)
	wantCode(t, "another team's retry", err, "InvalidCapacityReservationId.NotFound")

	res, err := c.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{id}})
	if err != nil || len(res.CapacityReservations) != 1 || !res.CapacityReservations[0].EndDate.Equal(*x.CapacityBlockExtensionEndDate) {
		t.Fatalf("the reservation: %v %+v, want it to end at %s", err, res, x.CapacityBlockExtensionEndDate)
	}
	hist, err := c.DescribeCapacityBlockExtensionHistory(ctx, &ec2.DescribeCapacityBlockExtensionHistoryInput{CapacityReservationIds: []string{id}})
	if err != nil || len(hist.CapacityBlockExtensions) != 1 {
		t.Fatalf("history: %v %+v, want one extension", err, hist)
	}
	ledger, err := e.svc.Ledger(ctx, "", e.alpha.ID)
	if err != nil || len(ledger.Entries) != 2 {
		t.Fatalf("alpha's ledger: %v %+v, want the purchase and one extension", err, ledger.Entries)
	}
	charged := []string{ledger.Entries[0].Amount.String(), ledger.Entries[1].Amount.String()}
	wantCharged := []string{aws.ToString(offs.CapacityBlockOfferings[0].UpfrontFee), aws.ToString(x.UpfrontFee)}
	if diff := cmp.Diff(wantCharged, charged, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("alpha's charges (-want +got):\n%s", diff)
	}
}

// TestEC2NoCapacity: buying an offering whose capacity another purchase
// took is InsufficientInstanceCapacity, and buys nothing; a search where
// nothing fits answers no offerings.
func TestEC2NoCapacity(t *testing.T) {
	e := newEnv(t, awsapi.Options{})
	ctx := context.Background()
	c := e.ec2(memberKey)
	// Every zone has 16 A100 nodes, one p4d.24xlarge each, and the window
	// fits one 24h block exactly.
	from, to := t0.Add(24*time.Hour), t0.Add(48*time.Hour)
	search := func() []types.CapacityBlockOffering {
		t.Helper()
		out, err := c.DescribeCapacityBlockOfferings(ctx, &ec2.DescribeCapacityBlockOfferingsInput{
			InstanceType: aws.String("p4d.24xlarge"), InstanceCount: aws.Int32(16),
			CapacityDurationHours: aws.Int32(24), StartDateRange: aws.Time(from), EndDateRange: aws.Time(to),
		})
		if err != nil {
			t.Fatal(err)
		}
		return out.CapacityBlockOfferings
	}
	buy := func(o types.CapacityBlockOffering) error {
		_, err := c.PurchaseCapacityBlock(ctx, &ec2.PurchaseCapacityBlockInput{
			CapacityBlockOfferingId: o.CapacityBlockOfferingId, InstancePlatform: types.CapacityReservationInstancePlatformLinuxUnix,
		})
		return err
	}
	first, second := search(), search()
	if len(first) == 0 {
		t.Fatal("no offerings")
	}
	if err := buy(first[0]); err != nil {
		t.Fatal(err)
	}
	zone := aws.ToString(first[0].AvailabilityZone)
	var sameZone, otherZone *types.CapacityBlockOffering
	for i, o := range second {
		if aws.ToString(o.AvailabilityZone) == zone {
			sameZone = &second[i]
		} else {
			otherZone = &second[i]
		}
	}
	if sameZone == nil || otherZone == nil {
		t.Fatalf("the second search offered %+v, want both zones", second)
	}
	wantCode(t, "buying capacity already sold", buy(*sameZone), "InsufficientInstanceCapacity")
	if blocks, _ := e.svc.ListBlocks(ctx, "", ""); len(blocks) != 1 {
		t.Errorf("%d blocks, want 1", len(blocks))
	}
	if err := buy(*otherZone); err != nil {
		t.Fatal(err)
	}
	if left := search(); len(left) != 0 {
		t.Errorf("a full window offers %+v, want nothing", left)
	}
}

// TestEC2Refusals: roles, teams and bad input, each in EC2's terms, and
// nothing stored.
func TestEC2Refusals(t *testing.T) {
	e := newEnv(t, awsapi.Options{})
	ctx := context.Background()
	member := e.ec2(memberKey)
	offs, err := searchH100(ctx, member, 1, 3, t0.Add(24*time.Hour), t0.Add(72*time.Hour))
	if err != nil || len(offs.CapacityBlockOfferings) < 2 {
		t.Fatalf("search: %v %+v", err, offs)
	}
	purchase := func(c *ec2.Client, o types.CapacityBlockOffering) (*ec2.PurchaseCapacityBlockOutput, error) {
		return c.PurchaseCapacityBlock(ctx, &ec2.PurchaseCapacityBlockInput{
			CapacityBlockOfferingId: o.CapacityBlockOfferingId, InstancePlatform: types.CapacityReservationInstancePlatformLinuxUnix,
		})
	}

	// A viewer may search but not buy.
	viewer := e.ec2(viewerKey)
	if _, err := searchH100(ctx, viewer, 1, 3, t0.Add(24*time.Hour), t0.Add(72*time.Hour)); err != nil {
		t.Errorf("a viewer's search: %v", err)
	}
	_, err = purchase(viewer, offs.CapacityBlockOfferings[1])
	wantCode(t, "a viewer buying", err, "UnauthorizedOperation")
	if blocks, _ := e.svc.ListBlocks(ctx, "", ""); len(blocks) != 0 {
		t.Fatalf("a viewer's refused purchase stored %d blocks", len(blocks))
	}

	bought, err := purchase(member, offs.CapacityBlockOfferings[0])
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(bought.CapacityReservation.CapacityReservationId)
	// The audit log holds both purchases, the refused and the made.
	records, err := e.svc.Audit(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range records {
		got = append(got, fmt.Sprintf("%s %s %s %d %s", r.User, r.Route, r.Subject, r.Status, r.Outcome))
	}
	want := []string{
		fmt.Sprintf("%s /aws EC2 PurchaseCapacityBlock  403 UnauthorizedOperation", e.keys.keys[viewerKey].p.User.ID),
		fmt.Sprintf("%s /aws EC2 PurchaseCapacityBlock %s 200 ok", e.keys.keys[memberKey].p.User.ID, id),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit log (-want +got):\n%s", diff)
	}
	_, err = viewer.CancelCapacityReservation(ctx, &ec2.CancelCapacityReservationInput{CapacityReservationId: aws.String(id)})
	wantCode(t, "a viewer cancelling", err, "UnauthorizedOperation")

	// Another team's reservation does not exist, whatever the action.
	beta := e.ec2(betaKey)
	_, err = beta.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{id}})
	wantCode(t, "describing another team's", err, "InvalidCapacityReservationId.NotFound")
	_, err = beta.CancelCapacityReservation(ctx, &ec2.CancelCapacityReservationInput{CapacityReservationId: aws.String(id)})
	wantCode(t, "cancelling another team's", err, "InvalidCapacityReservationId.NotFound")
	_, err = beta.DescribeCapacityBlockExtensionOfferings(ctx, &ec2.DescribeCapacityBlockExtensionOfferingsInput{
		CapacityReservationId: aws.String(id), CapacityBlockExtensionDurationHours: aws.Int32(1),
	})
	wantCode(t, "extending another team's", err, "InvalidCapacityReservationId.NotFound")
	_, err = beta.DescribeCapacityBlockStatus(ctx, &ec2.DescribeCapacityBlockStatusInput{CapacityBlockIds: []string{id}})
	wantCode(t, "another team's status", err, "InvalidCapacityReservationId.NotFound")
	_, err = beta.PurchaseCapacityBlockExtension(ctx, &ec2.PurchaseCapacityBlockExtensionInput{
		CapacityReservationId: aws.String(id), CapacityBlockExtensionOfferingId: aws.String("cbe-x"),
	})
	wantCode(t, "buying another team's extension", err, "InvalidCapacityReservationId.NotFound")
	_, err = beta.DescribeCapacityBlockExtensionHistory(ctx, &ec2.DescribeCapacityBlockExtensionHistoryInput{CapacityReservationIds: []string{id}})
	wantCode(t, "another team's extension history", err, "InvalidCapacityReservationId.NotFound")
	if res, err := beta.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{}); err != nil || len(res.CapacityReservations) != 0 {
		t.Errorf("beta lists %v %+v, want nothing", err, res)
	}
	// An admin sees every team's.
	if res, err := e.ec2(adminKey).DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{id}}); err != nil || len(res.CapacityReservations) != 1 {
		t.Errorf("the admin: %v %+v", err, res)
	}
	if b, err := e.svc.GetBlock(ctx, "", id); err != nil || b.State != "scheduled" {
		t.Errorf("after the refusals the block is %v %+v, want scheduled", err, b.State)
	}

	// Bad input.
	for name, call := range map[string]struct {
		run  func() error
		code string
	}{
		"unknown type": {func() error {
			_, err := member.DescribeCapacityBlockOfferings(ctx, &ec2.DescribeCapacityBlockOfferingsInput{
				InstanceType: aws.String("p9.huge"), InstanceCount: aws.Int32(1), CapacityDurationHours: aws.Int32(3)})
			return err
		}, "InvalidParameterValue"},
		"no count": {func() error {
			_, err := member.DescribeCapacityBlockOfferings(ctx, &ec2.DescribeCapacityBlockOfferingsInput{
				InstanceType: aws.String("p5.48xlarge"), CapacityDurationHours: aws.Int32(3)})
			return err
		}, "MissingParameter"},
		"duration above the fleet's": {func() error {
			_, err := member.DescribeCapacityBlockOfferings(ctx, &ec2.DescribeCapacityBlockOfferingsInput{
				InstanceType: aws.String("p5.48xlarge"), InstanceCount: aws.Int32(1), CapacityDurationHours: aws.Int32(24 * 400)})
			return err
		}, "InvalidParameterValue"},
		"forged offering": {func() error {
			_, err := member.PurchaseCapacityBlock(ctx, &ec2.PurchaseCapacityBlockInput{
				CapacityBlockOfferingId: aws.String("cbo-forged"), InstancePlatform: types.CapacityReservationInstancePlatformLinuxUnix})
			return err
		}, "InvalidParameterValue"},
		"a tag key too long": {func() error {
			_, err := member.PurchaseCapacityBlock(ctx, &ec2.PurchaseCapacityBlockInput{
				CapacityBlockOfferingId: offs.CapacityBlockOfferings[1].CapacityBlockOfferingId, InstancePlatform: types.CapacityReservationInstancePlatformLinuxUnix,
				TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeCapacityReservation,
					Tags: []types.Tag{{Key: aws.String(strings.Repeat("k", 129)), Value: aws.String("v")}}}}})
			return err
		}, "InvalidParameterValue"},
		"a tag with a control character": {func() error {
			_, err := member.PurchaseCapacityBlock(ctx, &ec2.PurchaseCapacityBlockInput{
				CapacityBlockOfferingId: offs.CapacityBlockOfferings[1].CapacityBlockOfferingId, InstancePlatform: types.CapacityReservationInstancePlatformLinuxUnix,
				TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeCapacityReservation,
					Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("a\x1b[2Jb")}}}}})
			return err
		}, "InvalidParameterValue"},
		"dry run": {func() error {
			_, err := member.CancelCapacityReservation(ctx, &ec2.CancelCapacityReservationInput{CapacityReservationId: aws.String(id), DryRun: aws.Bool(true)})
			return err
		}, "DryRunOperation"},
		"a viewer's dry run": {func() error {
			_, err := viewer.CancelCapacityReservation(ctx, &ec2.CancelCapacityReservationInput{CapacityReservationId: aws.String(id), DryRun: aws.Bool(true)})
			return err
		}, "UnauthorizedOperation"},
		"unknown action": {func() error {
			_, err := member.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
			return err
		}, "InvalidAction"},
	} {
		wantCode(t, name, call.run(), call.code)
	}
	if b, err := e.svc.GetBlock(ctx, "", id); err != nil || b.State != "scheduled" {
		t.Errorf("after bad input the block is %v %+v, want scheduled", err, b.State)
	}
	if blocks, _ := e.svc.ListBlocks(ctx, "", ""); len(blocks) != 1 {
		t.Errorf("%d blocks, want 1", len(blocks))
	}
}

// TestEC2Authentication: a wrong secret, an unknown key, a revoked key
// and a skewed clock are refused in EC2's terms.
func TestEC2Authentication(t *testing.T) {
	e := newEnv(t, awsapi.Options{})
	ctx := context.Background()
	describe := func(c *ec2.Client) error {
		_, err := c.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{})
		return err
	}
	if err := describe(e.ec2(memberKey)); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "wrong secret", describe(e.ec2(memberKey, "not-the-secret")), "SignatureDoesNotMatch")
	wantCode(t, "unknown key", describe(e.ec2("AKIANOSUCHKEY0000001", "whatever")), "AuthFailure")
	e.keys.revoke(memberKey)
	wantCode(t, "revoked key", describe(e.ec2(memberKey)), "AuthFailure")

	// The server's wall clock ten minutes ahead of the client's.
	skewed := newEnv(t, awsapi.Options{Now: func() time.Time { return time.Now().Add(10 * time.Minute) }})
	wantCode(t, "clock skew", describe(skewed.ec2(memberKey)), "RequestExpired")
	if err := describe(newEnv(t, awsapi.Options{Now: func() time.Time { return time.Now().Add(4 * time.Minute) }}).ec2(memberKey)); err != nil {
		t.Errorf("four minutes of skew: %v", err)
	}
}
