package tfprovider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"capblock/internal/client"
)

// planResource is capblock_plan: a training plan bought from search
// criteria. Any change buys a new one. The API cannot cancel a plan, so
// destroy only forgets it, with a warning.
type planResource struct {
	client *client.Client
}

func newPlanResource() resource.Resource { return &planResource{} }

type planModel struct {
	ID            types.String `tfsdk:"id"`
	InstanceType  types.String `tfsdk:"instance_type"`
	InstanceCount types.Int64  `tfsdk:"instance_count"`
	DurationHours types.Int64  `tfsdk:"duration_hours"`
	StartAfter    types.String `tfsdk:"start_after"`
	EndBefore     types.String `tfsdk:"end_before"`
	Zone          types.String `tfsdk:"zone"`
	Target        types.String `tfsdk:"target"`
	MaxSegments   types.Int64  `tfsdk:"max_segments"`
	Name          types.String `tfsdk:"name"`
	Team          types.String `tfsdk:"team"`
	State         types.String `tfsdk:"state"`
	UpfrontFee    types.String `tfsdk:"upfront_fee"`
	Currency      types.String `tfsdk:"currency"`
	Segments      types.List   `tfsdk:"segments"`
}

var segmentType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"block_id":       types.StringType,
	"instance_type":  types.StringType,
	"instance_count": types.Int64Type,
	"zone":           types.StringType,
	"start_time":     types.StringType,
	"end_time":       types.StringType,
	"duration_hours": types.Int64Type,
	"state":          types.StringType,
}}

func (r *planResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_plan"
}

func (r *planResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	keepThenReplace := []planmodifier.String{stringplanmodifier.UseStateForUnknown(), stringplanmodifier.RequiresReplace()}
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	replaceInt := []planmodifier.Int64{int64planmodifier.RequiresReplace()}
	segment := map[string]schema.Attribute{
		"block_id":       schema.StringAttribute{Computed: true, Description: "The segment's block (cb-…)."},
		"instance_type":  schema.StringAttribute{Computed: true},
		"instance_count": schema.Int64Attribute{Computed: true},
		"zone":           schema.StringAttribute{Computed: true},
		"start_time":     schema.StringAttribute{Computed: true},
		"end_time":       schema.StringAttribute{Computed: true},
		"duration_hours": schema.Int64Attribute{Computed: true},
		"state":          schema.StringAttribute{Computed: true},
	}
	resp.Schema = schema.Schema{
		Description: "A training plan: create searches plan offerings with these criteria and buys the first of exactly duration_hours. The API cannot cancel a plan: destroy removes it from state and warns.",
		Attributes: map[string]schema.Attribute{
			"id":             schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "The plan's id (tp-…)."},
			"instance_type":  schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "Instance type of every segment."},
			"instance_count": schema.Int64Attribute{Required: true, PlanModifiers: replaceInt, Description: "Instances of every segment."},
			"duration_hours": schema.Int64Attribute{Required: true, PlanModifiers: replaceInt, Description: "Total hours of the plan, all segments together."},
			"start_after":    schema.StringAttribute{Required: true, Description: "Earliest start of the first segment (RFC 3339)."},
			"end_before":     schema.StringAttribute{Required: true, Description: "Latest end of the last segment (RFC 3339)."},
			"zone":           schema.StringAttribute{Optional: true, Computed: true, PlanModifiers: keepThenReplace, Description: "Zone; any when unset."},
			"target": schema.StringAttribute{Optional: true, Computed: true, PlanModifiers: keepThenReplace,
				Description: "What the plan is for; the server's default (training-job) when unset."},
			"max_segments": schema.Int64Attribute{Optional: true,
				Description: "Most segments the plan may be split into; the server's default when unset."},
			"name": schema.StringAttribute{Optional: true, PlanModifiers: replace, Description: "The plan's name."},
			"team": schema.StringAttribute{Optional: true, Computed: true, PlanModifiers: keepThenReplace,
				Description: "Team id to buy for (an admin only); the token's own team when unset."},
			"state":       schema.StringAttribute{Computed: true, Description: "pending, scheduled, active, expired or failed."},
			"upfront_fee": schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "Fee paid, as a decimal amount."},
			"currency":    schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "Currency of upfront_fee."},
			"segments": schema.ListNestedAttribute{Computed: true, NestedObject: schema.NestedAttributeObject{Attributes: segment},
				PlanModifiers: []planmodifier.List{listplanmodifier.UseStateForUnknown()},
				Description:   "The plan's segments, each a block, in time order."},
		},
	}
}

func (r *planResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.client = clientOf(req.ProviderData, &resp.Diagnostics)
}

func (r *planResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}

// ModifyPlan lets a plan stay when new criteria still hold for it (a
// wider window, a higher max_segments) and replaces it otherwise.
func (r *planResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() {
		return
	}
	var plan, state planModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	var segs []planSegmentModel
	resp.Diagnostics.Append(state.Segments.ElementsAs(ctx, &segs, false)...)
	if resp.Diagnostics.HasError() || len(segs) == 0 {
		return
	}
	first := parseTime(segs[0].StartTime, path.Root("segments"), &resp.Diagnostics)
	last := parseTime(segs[len(segs)-1].EndTime, path.Root("segments"), &resp.Diagnostics)
	if !plan.StartAfter.IsUnknown() && !plan.StartAfter.Equal(state.StartAfter) &&
		first.Before(parseTime(plan.StartAfter, path.Root("start_after"), &resp.Diagnostics)) {
		resp.RequiresReplace = append(resp.RequiresReplace, path.Root("start_after"))
	}
	if !plan.EndBefore.IsUnknown() && !plan.EndBefore.Equal(state.EndBefore) &&
		last.After(parseTime(plan.EndBefore, path.Root("end_before"), &resp.Diagnostics)) {
		resp.RequiresReplace = append(resp.RequiresReplace, path.Root("end_before"))
	}
	if !plan.MaxSegments.IsUnknown() && !plan.MaxSegments.IsNull() && !plan.MaxSegments.Equal(state.MaxSegments) &&
		int64(len(segs)) > plan.MaxSegments.ValueInt64() {
		resp.RequiresReplace = append(resp.RequiresReplace, path.Root("max_segments"))
	}
}

func (r *planResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	if unconfigured(r.client, &resp.Diagnostics) {
		return
	}
	var plan planModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	after := parseTime(plan.StartAfter, path.Root("start_after"), &resp.Diagnostics)
	before := parseTime(plan.EndBefore, path.Root("end_before"), &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	hours := plan.DurationHours.ValueInt64()
	offers, err := r.client.PlanOfferings(ctx, client.PlanOfferingsQuery{
		InstanceType: plan.InstanceType.ValueString(), InstanceCount: int(plan.InstanceCount.ValueInt64()),
		DurationHours: int(hours), StartAfter: after, EndBefore: before, Zone: plan.Zone.ValueString(),
		Target: plan.Target.ValueString(), MaxSegments: int(plan.MaxSegments.ValueInt64()),
	})
	if err != nil {
		resp.Diagnostics.AddError("Searching training plan offerings", err.Error())
		return
	}
	var offer *client.PlanOffering
	for i, o := range offers {
		if int64(o.DurationHours) == hours {
			offer = &offers[i]
			break
		}
	}
	if offer == nil {
		window := fmt.Sprintf("starting after %s and ending by %s", after.Format(time.RFC3339), before.Format(time.RFC3339))
		resp.Diagnostics.AddError("No training plan offering fits",
			"No plan offering of "+describeSearch(plan.InstanceType.ValueString(), plan.InstanceCount.ValueInt64(), hours, window)+
				"; widen the window, allow more segments, or change the count or the duration.")
		return
	}
	token := clientToken("plan", offer.OfferingID, plan.Name.ValueString(), plan.Team.ValueString())
	p, err := withRetries(ctx, func() (client.Plan, error) {
		return r.client.BuyPlan(ctx, client.BuyPlanRequest{OfferingID: offer.OfferingID, ClientToken: token,
			Name: plan.Name.ValueString(), Team: plan.Team.ValueString()})
	})
	if err != nil {
		resp.Diagnostics.AddError("Buying training plan offering "+offer.OfferingID, err.Error())
		return
	}
	plan.fromPlan(p)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *planResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	if unconfigured(r.client, &resp.Diagnostics) {
		return
	}
	var state planModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	p, err := r.client.Plan(ctx, state.ID.ValueString())
	if isNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Reading training plan "+state.ID.ValueString(), err.Error())
		return
	}
	if state.InstanceType.IsNull() && len(p.Segments) > 0 {
		// Imported: read the tightest criteria the plan meets.
		first, last := p.Segments[0], p.Segments[len(p.Segments)-1]
		hours := 0
		for _, s := range p.Segments {
			hours += s.DurationHours
		}
		state.InstanceType = types.StringValue(first.InstanceType)
		state.InstanceCount = types.Int64Value(int64(first.InstanceCount))
		state.DurationHours = types.Int64Value(int64(hours))
		state.StartAfter, state.EndBefore = timeValue(first.StartTime), timeValue(last.EndTime)
	}
	state.fromPlan(p)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Update only writes down new criteria that the plan still meets
// (ModifyPlan replaces it otherwise).
func (r *planResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	if unconfigured(r.client, &resp.Diagnostics) {
		return
	}
	var plan planModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	p, err := r.client.Plan(ctx, plan.ID.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Reading training plan "+plan.ID.ValueString(), err.Error())
		return
	}
	plan.fromPlan(p)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *planResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	if unconfigured(r.client, &resp.Diagnostics) {
		return
	}
	var state planModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id := state.ID.ValueString()
	cancelWhileLive(ctx, &resp.Diagnostics, "training plan", id, livePlanState,
		func(ctx context.Context) (string, error) {
			p, err := r.client.Plan(ctx, id)
			return p.State, err
		},
		func(ctx context.Context) error {
			_, err := r.client.CancelPlan(ctx, id)
			return err
		})
}

// livePlanState reports whether a plan in state has a segment still to
// come or active, which destroying it cancels.
func livePlanState(state string) bool {
	return state == "pending" || state == "scheduled" || state == "active"
}

type planSegmentModel struct {
	BlockID       types.String `tfsdk:"block_id"`
	InstanceType  types.String `tfsdk:"instance_type"`
	InstanceCount types.Int64  `tfsdk:"instance_count"`
	Zone          types.String `tfsdk:"zone"`
	StartTime     types.String `tfsdk:"start_time"`
	EndTime       types.String `tfsdk:"end_time"`
	DurationHours types.Int64  `tfsdk:"duration_hours"`
	State         types.String `tfsdk:"state"`
}

func (m *planModel) fromPlan(p client.Plan) {
	m.ID = types.StringValue(p.ID)
	m.Name = optionalString(m.Name, p.Name)
	m.Team = types.StringValue(p.Team)
	m.Target = types.StringValue(p.Target)
	m.State = types.StringValue(p.State)
	m.UpfrontFee = keepAmount(m.UpfrontFee, p.UpfrontFee.Amount)
	m.Currency = types.StringValue(p.UpfrontFee.Currency)
	segs := make([]attr.Value, len(p.Segments))
	for i, s := range p.Segments {
		segs[i] = types.ObjectValueMust(segmentType.AttrTypes, map[string]attr.Value{
			"block_id":       types.StringValue(s.BlockID),
			"instance_type":  types.StringValue(s.InstanceType),
			"instance_count": types.Int64Value(int64(s.InstanceCount)),
			"zone":           types.StringValue(s.Zone),
			"start_time":     timeValue(s.StartTime),
			"end_time":       timeValue(s.EndTime),
			"duration_hours": types.Int64Value(int64(s.DurationHours)),
			"state":          types.StringValue(s.State),
		})
	}
	m.Segments = types.ListValueMust(segmentType, segs)
	if len(p.Segments) > 0 {
		m.InstanceType = types.StringValue(p.Segments[0].InstanceType)
		m.InstanceCount = types.Int64Value(int64(p.Segments[0].InstanceCount))
		m.Zone = types.StringValue(p.Segments[0].Zone)
	}
}
