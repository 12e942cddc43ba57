package tfprovider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"capblock/internal/client"
)

// budgetResource is capblock_budget (admin): the cap on a team's net
// spend. Destroy sets the team's budget period to none.
type budgetResource struct {
	client *client.Client
}

func newBudgetResource() resource.Resource { return &budgetResource{} }

type budgetModel struct {
	ID       types.String `tfsdk:"id"`
	Team     types.String `tfsdk:"team"`
	Amount   types.String `tfsdk:"amount"`
	Currency types.String `tfsdk:"currency"`
	Period   types.String `tfsdk:"period"`
}

func (r *budgetResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_budget"
}

func (r *budgetResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A team's budget (admin): purchases that would take its net spend in the period above amount are refused. Destroy removes the budget (period none).",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
				Description: "The team id; import takes the same."},
			"team": schema.StringAttribute{Required: true, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Description: "Team id."},
			"amount": schema.StringAttribute{Required: true, Description: "Most net spend per period, a decimal amount such as \"5000.00\"."},
			"currency": schema.StringAttribute{Optional: true, Computed: true, PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
				Description: "Currency of amount; the fleet's when unset."},
			"period": schema.StringAttribute{Required: true, Description: "month (spend since the first of the month, UTC) or total (all time)."},
		},
	}
}

func (r *budgetResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.client = clientOf(req.ProviderData, &resp.Diagnostics)
}

func (r *budgetResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("team"), req.ID)...)
}

func (r *budgetResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	if unconfigured(r.client, &resp.Diagnostics) {
		return
	}
	var plan budgetModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if r.put(ctx, &plan, &resp.Diagnostics) {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
}

func (r *budgetResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	if unconfigured(r.client, &resp.Diagnostics) {
		return
	}
	var plan budgetModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if r.put(ctx, &plan, &resp.Diagnostics) {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
}

// put stores the budget plan describes; it reports whether it did.
func (r *budgetResource) put(ctx context.Context, plan *budgetModel, diags *diag.Diagnostics) bool {
	if diags.HasError() {
		return false
	}
	team := plan.Team.ValueString()
	switch plan.Period.ValueString() {
	case "month", "total":
	default:
		diags.AddAttributeError(path.Root("period"), "Invalid budget period",
			"period "+plan.Period.ValueString()+" is not month or total (destroy the resource to remove a budget)")
		return false
	}
	currency := plan.Currency.ValueString()
	if plan.Currency.IsNull() || plan.Currency.IsUnknown() {
		types, err := r.client.InstanceTypes(ctx)
		if err != nil {
			diags.AddError("Reading the fleet's currency", err.Error())
			return false
		}
		for _, t := range types {
			currency = t.OnDemandPrice.Currency
		}
	}
	b, err := r.client.PutBudget(ctx, team, client.Budget{
		Amount: client.Money{Amount: plan.Amount.ValueString(), Currency: currency}, Period: plan.Period.ValueString(),
	})
	if err != nil {
		diags.AddError("Setting the budget of team "+team, err.Error())
		return false
	}
	plan.fromBudget(team, b)
	return true
}

func (r *budgetResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	if unconfigured(r.client, &resp.Diagnostics) {
		return
	}
	var state budgetModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	team := state.Team.ValueString()
	l, err := r.client.Ledger(ctx, team)
	if isNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Reading the budget of team "+team, err.Error())
		return
	}
	if l.Budget == nil || l.Budget.Period == "none" {
		resp.State.RemoveResource(ctx)
		return
	}
	state.fromBudget(team, *l.Budget)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *budgetResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	if unconfigured(r.client, &resp.Diagnostics) {
		return
	}
	var state budgetModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	team := state.Team.ValueString()
	_, err := r.client.PutBudget(ctx, team, client.Budget{Amount: client.Money{Amount: "0", Currency: state.Currency.ValueString()}, Period: "none"})
	if err != nil && !isNotFound(err) {
		resp.Diagnostics.AddError("Removing the budget of team "+team, err.Error())
	}
}

func (m *budgetModel) fromBudget(team string, b client.Budget) {
	m.ID = types.StringValue(team)
	m.Team = types.StringValue(team)
	m.Amount = keepAmount(m.Amount, b.Amount.Amount)
	m.Currency = types.StringValue(b.Amount.Currency)
	m.Period = types.StringValue(b.Period)
}
