package tfprovider

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"capblock/internal/client"
)

// quotaResource is capblock_quota (admin): one quota row of a team, for
// every instance type or one. Destroy sets its limits back to 0, the
// operator's defaults.
type quotaResource struct {
	client *client.Client
}

func newQuotaResource() resource.Resource { return &quotaResource{} }

type quotaModel struct {
	ID                   types.String `tfsdk:"id"`
	Team                 types.String `tfsdk:"team"`
	InstanceType         types.String `tfsdk:"instance_type"`
	MaxInstancesPerBlock types.Int64  `tfsdk:"max_instances_per_block"`
	MaxInstancesHeld     types.Int64  `tfsdk:"max_instances_held"`
	MaxDurationHours     types.Int64  `tfsdk:"max_duration_hours"`
	MaxLeadDays          types.Int64  `tfsdk:"max_lead_days"`
}

func (r *quotaResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_quota"
}

func (r *quotaResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	limit := func(what string) schema.Int64Attribute {
		return schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(0),
			Description: what + "; 0 (the default) is the operator's limit."}
	}
	resp.Schema = schema.Schema{
		Description: "A team's quota row (admin), for every instance type or one. Destroy sets its limits back to 0, the operator's defaults.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
				Description: "TEAM, or TEAM/INSTANCE_TYPE for a row of one type; import takes the same."},
			"team":                    schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "Team id."},
			"instance_type":           schema.StringAttribute{Optional: true, PlanModifiers: replace, Description: "The type this row is for; every type when unset."},
			"max_instances_per_block": limit("Most instances in one block"),
			"max_instances_held":      limit("Most instances held at once"),
			"max_duration_hours":      limit("Longest block, in hours"),
			"max_lead_days":           limit("How many days ahead a block may start"),
		},
	}
}

func (r *quotaResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.client = clientOf(req.ProviderData, &resp.Diagnostics)
}

func (r *quotaResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	team, typ, _ := strings.Cut(req.ID, "/")
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("team"), team)...)
	if typ != "" {
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("instance_type"), typ)...)
	}
}

func (r *quotaResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	if unconfigured(r.client, &resp.Diagnostics) {
		return
	}
	var plan quotaModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if r.put(ctx, &plan, &resp.Diagnostics) {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
}

func (r *quotaResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	if unconfigured(r.client, &resp.Diagnostics) {
		return
	}
	var plan quotaModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if r.put(ctx, &plan, &resp.Diagnostics) {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
}

// put stores the row that plan describes and reads back what the server
// stored; it reports whether it did.
func (r *quotaResource) put(ctx context.Context, plan *quotaModel, diags *diag.Diagnostics) bool {
	if diags.HasError() {
		return false
	}
	q, err := r.client.PutQuota(ctx, plan.Team.ValueString(), plan.quota())
	if err != nil {
		diags.AddError("Setting the quota of team "+plan.Team.ValueString(), err.Error())
		return false
	}
	plan.fromQuota(plan.Team.ValueString(), q)
	return true
}

func (r *quotaResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	if unconfigured(r.client, &resp.Diagnostics) {
		return
	}
	var state quotaModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	team := state.Team.ValueString()
	qs, err := r.client.Quotas(ctx, team)
	if isNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Reading the quotas of team "+team, err.Error())
		return
	}
	for _, q := range qs {
		if q.InstanceType == state.InstanceType.ValueString() {
			state.fromQuota(team, q)
			resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
			return
		}
	}
	resp.State.RemoveResource(ctx)
}

func (r *quotaResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	if unconfigured(r.client, &resp.Diagnostics) {
		return
	}
	var state quotaModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	team := state.Team.ValueString()
	_, err := r.client.PutQuota(ctx, team, client.Quota{InstanceType: state.InstanceType.ValueString()})
	if err != nil && !isNotFound(err) {
		resp.Diagnostics.AddError("Resetting the quota of team "+team, err.Error())
	}
}

func (m *quotaModel) quota() client.Quota {
	return client.Quota{
		InstanceType:         m.InstanceType.ValueString(),
		MaxInstancesPerBlock: int(m.MaxInstancesPerBlock.ValueInt64()),
		MaxInstancesHeld:     int(m.MaxInstancesHeld.ValueInt64()),
		MaxDurationHours:     int(m.MaxDurationHours.ValueInt64()),
		MaxLeadDays:          int(m.MaxLeadDays.ValueInt64()),
	}
}

func (m *quotaModel) fromQuota(team string, q client.Quota) {
	m.ID = types.StringValue(team)
	if q.InstanceType != "" {
		m.ID = types.StringValue(team + "/" + q.InstanceType)
	}
	m.Team = types.StringValue(team)
	m.InstanceType = optionalString(m.InstanceType, q.InstanceType)
	m.MaxInstancesPerBlock = types.Int64Value(int64(q.MaxInstancesPerBlock))
	m.MaxInstancesHeld = types.Int64Value(int64(q.MaxInstancesHeld))
	m.MaxDurationHours = types.Int64Value(int64(q.MaxDurationHours))
	m.MaxLeadDays = types.Int64Value(int64(q.MaxLeadDays))
}
