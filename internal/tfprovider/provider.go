// Package tfprovider is capblock's Terraform provider, built on the
// Terraform plugin framework: a data source of block offerings and the
// resources capblock sells or administers (blocks, training plans,
// teams, quotas, budgets, webhooks), each a thin adapter over
// internal/client. docs/terraform.md is its user's reference.
package tfprovider

import (
	"context"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"capblock/internal/client"
)

// Address is the provider's source address; a configuration names it as
// "capblock/capblock" in required_providers.
const Address = "registry.terraform.io/capblock/capblock"

// Version is the provider's version as Terraform shows it.
var Version = "dev"

// DefaultEndpoint is the server the provider talks to when neither the
// configuration nor CAPBLOCK_URL names one: the CLI's default.
const DefaultEndpoint = "http://127.0.0.1:8080"

type capblockProvider struct {
	version string
}

// New returns the constructor of the provider that providerserver.Serve
// expects.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &capblockProvider{version: version} }
}

type providerModel struct {
	Endpoint types.String `tfsdk:"endpoint"`
	Token    types.String `tfsdk:"token"`
}

func (p *capblockProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "capblock"
	resp.Version = p.version
}

func (p *capblockProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Manage capblock capacity blocks, training plans, teams, quotas, budgets and webhooks.",
		Attributes: map[string]schema.Attribute{
			"endpoint": schema.StringAttribute{
				Optional:    true,
				Description: "The capblock server's URL, e.g. http://127.0.0.1:8080. Default: $CAPBLOCK_URL, else " + DefaultEndpoint + ".",
			},
			"token": schema.StringAttribute{
				Optional:    true,
				Sensitive:   true,
				Description: "An API token of the server. Default: $CAPBLOCK_TOKEN.",
			},
		},
	}
}

func (p *capblockProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if cfg.Endpoint.IsUnknown() || cfg.Token.IsUnknown() {
		// A value another resource computes: resources are planned
		// without a client and configured again once it is known.
		return
	}
	endpoint := firstSet(cfg.Endpoint.ValueString(), os.Getenv("CAPBLOCK_URL"), DefaultEndpoint)
	token := firstSet(cfg.Token.ValueString(), os.Getenv("CAPBLOCK_TOKEN"))
	if token == "" {
		resp.Diagnostics.AddAttributeError(path.Root("token"), "No capblock API token",
			"Set the provider's token, or CAPBLOCK_TOKEN in the environment (the first administrator's token is in admin.token beside the server's database).")
		return
	}
	c, err := client.New(endpoint, client.WithToken(token))
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "Invalid capblock endpoint", err.Error())
		return
	}
	resp.DataSourceData = c
	resp.ResourceData = c
}

func (p *capblockProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		newBlockResource,
		newPlanResource,
		newTeamResource,
		newQuotaResource,
		newBudgetResource,
		newWebhookResource,
	}
}

func (p *capblockProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newOfferingsDataSource}
}

// firstSet returns the first non-empty value.
func firstSet(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
