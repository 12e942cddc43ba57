package tfprovider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"capblock/internal/client"
)

// blockResource is capblock_block: a capacity block bought from search
// criteria. A later end_time extends it in place; any other change buys
// a new one.
type blockResource struct {
	client *client.Client
}

func newBlockResource() resource.Resource { return &blockResource{} }

type blockModel struct {
	ID            types.String `tfsdk:"id"`
	InstanceType  types.String `tfsdk:"instance_type"`
	InstanceCount types.Int64  `tfsdk:"instance_count"`
	DurationHours types.Int64  `tfsdk:"duration_hours"`
	StartAfter    types.String `tfsdk:"start_after"`
	EndBefore     types.String `tfsdk:"end_before"`
	Zone          types.String `tfsdk:"zone"`
	Name          types.String `tfsdk:"name"`
	Tags          types.Map    `tfsdk:"tags"`
	Team          types.String `tfsdk:"team"`
	StartTime     types.String `tfsdk:"start_time"`
	EndTime       types.String `tfsdk:"end_time"`
	UpfrontFee    types.String `tfsdk:"upfront_fee"`
	Currency      types.String `tfsdk:"currency"`
	State         types.String `tfsdk:"state"`
}

func (r *blockResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_block"
}

func (r *blockResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	keepThenReplace := []planmodifier.String{stringplanmodifier.UseStateForUnknown(), stringplanmodifier.RequiresReplace()}
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "A capacity block: create searches offerings with these criteria and buys the first of exactly duration_hours; a later end_time extends it; destroy cancels it under the operator's refund policy.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "The block's id (cb-…)."},
			"instance_type": schema.StringAttribute{Required: true, PlanModifiers: replace,
				Description: "Instance type to reserve, e.g. h100.8x."},
			"instance_count": schema.Int64Attribute{Required: true, PlanModifiers: []planmodifier.Int64{int64planmodifier.RequiresReplace()},
				Description: "Number of instances."},
			"duration_hours": schema.Int64Attribute{Required: true, PlanModifiers: []planmodifier.Int64{int64planmodifier.RequiresReplace()},
				Description: "Duration bought at create, in hours."},
			"start_after": schema.StringAttribute{Required: true,
				Description: "Earliest start (RFC 3339). A new window the block still fits changes nothing; one it does not fit buys a new block."},
			"end_before": schema.StringAttribute{Required: true,
				Description: "Latest end of the block bought (RFC 3339)."},
			"zone": schema.StringAttribute{Optional: true, Computed: true, PlanModifiers: keepThenReplace,
				Description: "Zone to buy in; any zone when unset."},
			"name": schema.StringAttribute{Optional: true, PlanModifiers: replace, Description: "The block's name."},
			"tags": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				PlanModifiers: []planmodifier.Map{mapplanmodifier.RequiresReplace()}, Description: "The block's tags."},
			"team": schema.StringAttribute{Optional: true, Computed: true, PlanModifiers: keepThenReplace,
				Description: "Team id to buy for (an admin only); the token's own team when unset."},
			"start_time": schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "When the block starts."},
			"end_time": schema.StringAttribute{Optional: true, Computed: true, PlanModifiers: keep,
				Description: "When the block ends. Set a later time to extend the block in place by whole hours; an earlier one replaces it. Set at create, the block bought must end then."},
			"upfront_fee": schema.StringAttribute{Computed: true, Description: "Fee paid, extensions included, as a decimal amount."},
			"currency":    schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "Currency of upfront_fee."},
			"state":       schema.StringAttribute{Computed: true, Description: "payment-pending, scheduled, active, expired, payment-failed, cancelled or failed."},
		},
	}
}

func (r *blockResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.client = clientOf(req.ProviderData, &resp.Diagnostics)
}

func (r *blockResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}

// ModifyPlan decides what a change of the window or the end means: a
// window the block still fits is only written down, one it does not fit
// replaces the block; a later end_time is an extension, an earlier one a
// replacement.
func (r *blockResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() {
		return // create or destroy
	}
	var plan, state blockModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	start := parseTime(state.StartTime, path.Root("start_time"), &resp.Diagnostics)
	if !plan.StartAfter.IsUnknown() && !plan.StartAfter.Equal(state.StartAfter) {
		if after := parseTime(plan.StartAfter, path.Root("start_after"), &resp.Diagnostics); start.Before(after) {
			resp.RequiresReplace = append(resp.RequiresReplace, path.Root("start_after"))
		}
	}
	if !plan.EndBefore.IsUnknown() && !plan.EndBefore.Equal(state.EndBefore) && !plan.DurationHours.IsUnknown() {
		bought := start.Add(time.Duration(plan.DurationHours.ValueInt64()) * time.Hour)
		if before := parseTime(plan.EndBefore, path.Root("end_before"), &resp.Diagnostics); bought.After(before) {
			resp.RequiresReplace = append(resp.RequiresReplace, path.Root("end_before"))
		}
	}
	if plan.EndTime.IsUnknown() || plan.EndTime.IsNull() || plan.EndTime.Equal(state.EndTime) {
		return
	}
	end := parseTime(plan.EndTime, path.Root("end_time"), &resp.Diagnostics)
	current := parseTime(state.EndTime, path.Root("end_time"), &resp.Diagnostics)
	switch {
	case resp.Diagnostics.HasError() || end.Equal(current):
	case end.Before(current):
		resp.RequiresReplace = append(resp.RequiresReplace, path.Root("end_time"))
	case end.Sub(current)%time.Hour != 0:
		resp.Diagnostics.AddAttributeError(path.Root("end_time"), "Extension not in whole hours",
			fmt.Sprintf("end_time %s is %s after the block's end %s; a block is extended by whole hours", end.Format(time.RFC3339), end.Sub(current), current.Format(time.RFC3339)))
	}
}

func (r *blockResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	if unconfigured(r.client, &resp.Diagnostics) {
		return
	}
	var plan blockModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	after := parseTime(plan.StartAfter, path.Root("start_after"), &resp.Diagnostics)
	before := parseTime(plan.EndBefore, path.Root("end_before"), &resp.Diagnostics)
	end := parseTime(plan.EndTime, path.Root("end_time"), &resp.Diagnostics)
	tags := stringMap(ctx, plan.Tags, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	// 1. Search. An end_time given at create fixes the block's end: the
	// window closes there.
	hours := plan.DurationHours.ValueInt64()
	q := client.OfferingsQuery{
		InstanceTypes: []string{plan.InstanceType.ValueString()}, InstanceCount: int(plan.InstanceCount.ValueInt64()),
		DurationHours: int(hours), StartAfter: after, EndBefore: before, Zone: plan.Zone.ValueString(),
	}
	if !end.IsZero() {
		q.StartAfter = later(after, end.Add(-time.Duration(hours)*time.Hour))
		q.EndBefore = end
	}
	offers, err := r.client.Offerings(ctx, q)
	if err != nil {
		resp.Diagnostics.AddError("Searching capacity block offerings", err.Error())
		return
	}
	var offer *client.Offering
	for i, o := range offers {
		if int64(o.DurationHours) == hours && !o.Alternative && (end.IsZero() || o.EndTime.Equal(end)) {
			offer = &offers[i]
			break
		}
	}
	if offer == nil {
		window := fmt.Sprintf("starting after %s and ending by %s", q.StartAfter.Format(time.RFC3339), q.EndBefore.Format(time.RFC3339))
		resp.Diagnostics.AddError("No capacity block offering fits",
			"No offering of "+describeSearch(plan.InstanceType.ValueString(), plan.InstanceCount.ValueInt64(), hours, window)+
				"; widen the window, change the count or the duration, or search with the capblock_offerings data source.")
		return
	}
	// 2. Buy it, under a client token that makes a retry replay it.
	token := clientToken("block", offer.OfferingID, plan.Name.ValueString(), plan.Team.ValueString())
	b, err := withRetries(ctx, func() (client.Block, error) {
		return r.client.Buy(ctx, client.BuyRequest{OfferingID: offer.OfferingID, ClientToken: token,
			Name: plan.Name.ValueString(), Tags: tags, Team: plan.Team.ValueString()})
	})
	if err != nil {
		resp.Diagnostics.AddError("Buying capacity block offering "+offer.OfferingID, err.Error())
		return
	}
	plan.fromBlock(b)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *blockResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	if unconfigured(r.client, &resp.Diagnostics) {
		return
	}
	var state blockModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	b, err := r.client.Block(ctx, state.ID.ValueString())
	if isNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Reading capacity block "+state.ID.ValueString(), err.Error())
		return
	}
	if state.InstanceType.IsNull() {
		// Imported: the criteria the block was bought with are not
		// stored, so they are read as the tightest ones it meets.
		state.DurationHours = types.Int64Value(int64(b.DurationHours))
		state.StartAfter, state.EndBefore = timeValue(b.StartTime), timeValue(b.EndTime)
	}
	state.fromBlock(b)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *blockResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	if unconfigured(r.client, &resp.Diagnostics) {
		return
	}
	var plan, state blockModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	end := parseTime(plan.EndTime, path.Root("end_time"), &resp.Diagnostics)
	current := parseTime(state.EndTime, path.Root("end_time"), &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	id := state.ID.ValueString()
	var b client.Block
	var err error
	if end.After(current) {
		b, err = r.extend(ctx, id, current, end)
		if err != nil {
			resp.Diagnostics.AddError("Extending capacity block "+id, err.Error())
			return
		}
	} else if b, err = r.client.Block(ctx, id); err != nil {
		resp.Diagnostics.AddError("Reading capacity block "+id, err.Error())
		return
	}
	plan.fromBlock(b)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// extend buys the extension offering that moves the block's end from
// current to end.
func (r *blockResource) extend(ctx context.Context, id string, current, end time.Time) (client.Block, error) {
	hours := int(end.Sub(current) / time.Hour)
	offers, err := r.client.ExtensionOfferings(ctx, id, hours)
	if err != nil {
		return client.Block{}, err
	}
	for _, o := range offers {
		if o.EndTime.Equal(end) && !o.Alternative {
			return r.client.ExtendBlock(ctx, id, o.OfferingID)
		}
	}
	return client.Block{}, fmt.Errorf("no extension offering of %dh ends at %s (the capacity after the block is taken, or extensions are not open yet); keep end_time at %s or try another end",
		hours, end.Format(time.RFC3339), current.Format(time.RFC3339))
}

func (r *blockResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	if unconfigured(r.client, &resp.Diagnostics) {
		return
	}
	var state blockModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id := state.ID.ValueString()
	cancelWhileLive(ctx, &resp.Diagnostics, "capacity block", id, liveBlockState,
		func(ctx context.Context) (string, error) {
			b, err := r.client.Block(ctx, id)
			return b.State, err
		},
		func(ctx context.Context) error {
			_, err := r.client.CancelBlock(ctx, id)
			return err
		})
}

// fromBlock writes what the server says of the block; times and amounts
// that name the same value as the prior ones keep their spelling.
func (m *blockModel) fromBlock(b client.Block) {
	m.ID = types.StringValue(b.ID)
	m.InstanceType = types.StringValue(b.InstanceType)
	m.InstanceCount = types.Int64Value(int64(b.InstanceCount))
	m.Zone = types.StringValue(b.Zone)
	m.Name = optionalString(m.Name, b.Name)
	m.Tags = mapValue(m.Tags, b.Tags)
	m.Team = types.StringValue(b.Team)
	m.StartTime = timeValue(b.StartTime)
	m.EndTime = keepTime(m.EndTime, b.EndTime)
	m.UpfrontFee = types.StringValue(b.UpfrontFee.Amount)
	m.Currency = types.StringValue(b.UpfrontFee.Currency)
	m.State = types.StringValue(b.State)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
