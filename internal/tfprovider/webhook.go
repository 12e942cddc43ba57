package tfprovider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"capblock/internal/client"
)

// webhookResource is capblock_webhook: a URL subscribed to a team's
// events. The API cannot change a webhook, so any change makes a new one
// (with a new secret); the secret is only known from the create.
type webhookResource struct {
	client *client.Client
}

func newWebhookResource() resource.Resource { return &webhookResource{} }

type webhookModel struct {
	ID        types.String `tfsdk:"id"`
	URL       types.String `tfsdk:"url"`
	Events    types.List   `tfsdk:"events"`
	Team      types.String `tfsdk:"team"`
	Secret    types.String `tfsdk:"secret"`
	CreatedAt types.String `tfsdk:"created_at"`
}

func (r *webhookResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_webhook"
}

func (r *webhookResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "A webhook: events of a team POSTed to a URL, signed with the secret. Any change makes a new webhook; destroy deletes it.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "The webhook's id; import takes it."},
			"url": schema.StringAttribute{Required: true, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Description: "Where events are POSTed."},
			"events": schema.ListAttribute{Required: true, ElementType: types.StringType,
				PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplace()},
				Description:   "Event types (block.active), prefixes (block.*) or \"*\"."},
			"team": schema.StringAttribute{Optional: true, Computed: true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown(), stringplanmodifier.RequiresReplace()},
				Description:   "Team id whose events are sent (an admin only); the token's own team when unset."},
			"secret": schema.StringAttribute{Computed: true, Sensitive: true, PlanModifiers: keep,
				Description: "Key of the Capblock-Signature HMAC. The server shows it only at create: null after an import."},
			"created_at": schema.StringAttribute{Computed: true, PlanModifiers: keep},
		},
	}
}

func (r *webhookResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.client = clientOf(req.ProviderData, &resp.Diagnostics)
}

func (r *webhookResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}

func (r *webhookResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	if unconfigured(r.client, &resp.Diagnostics) {
		return
	}
	var plan webhookModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	events := stringList(ctx, plan.Events, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	w, err := r.client.CreateWebhook(ctx, client.NewWebhook{URL: plan.URL.ValueString(), Events: events, Team: plan.Team.ValueString()})
	if err != nil {
		resp.Diagnostics.AddError("Creating a webhook for "+plan.URL.ValueString(), err.Error())
		return
	}
	plan.fromWebhook(w)
	plan.Secret = types.StringValue(w.Secret)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *webhookResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	if unconfigured(r.client, &resp.Diagnostics) {
		return
	}
	var state webhookModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ws, err := r.client.Webhooks(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Listing webhooks", err.Error())
		return
	}
	for _, w := range ws {
		if w.ID == state.ID.ValueString() {
			state.fromWebhook(w)
			resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
			return
		}
	}
	resp.State.RemoveResource(ctx)
}

// Update is never called with a change: every argument replaces.
func (r *webhookResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	if unconfigured(r.client, &resp.Diagnostics) {
		return
	}
	var plan webhookModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *webhookResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	if unconfigured(r.client, &resp.Diagnostics) {
		return
	}
	var state webhookModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if _, err := r.client.DeleteWebhook(ctx, state.ID.ValueString()); err != nil && !isNotFound(err) {
		resp.Diagnostics.AddError("Deleting webhook "+state.ID.ValueString(), err.Error())
	}
}

func (m *webhookModel) fromWebhook(w client.Webhook) {
	m.ID = types.StringValue(w.ID)
	m.URL = types.StringValue(w.URL)
	m.Events = listValue(w.Events)
	m.Team = types.StringValue(w.Team)
	m.CreatedAt = timeValue(w.CreatedAt)
}
