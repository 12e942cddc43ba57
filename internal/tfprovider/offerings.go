package tfprovider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"capblock/internal/client"
)

// offeringsDataSource is capblock_offerings: a search of block
// offerings, best first.
type offeringsDataSource struct {
	client *client.Client
}

func newOfferingsDataSource() datasource.DataSource { return &offeringsDataSource{} }

type offeringsModel struct {
	InstanceTypes    types.List      `tfsdk:"instance_types"`
	InstanceCount    types.Int64     `tfsdk:"instance_count"`
	DurationHours    types.Int64     `tfsdk:"duration_hours"`
	MinDurationHours types.Int64     `tfsdk:"min_duration_hours"`
	MaxDurationHours types.Int64     `tfsdk:"max_duration_hours"`
	StartAfter       types.String    `tfsdk:"start_after"`
	EndBefore        types.String    `tfsdk:"end_before"`
	Zone             types.String    `tfsdk:"zone"`
	MaxResults       types.Int64     `tfsdk:"max_results"`
	Offerings        []offeringModel `tfsdk:"offerings"`
}

type offeringModel struct {
	ID            types.String `tfsdk:"id"`
	InstanceType  types.String `tfsdk:"instance_type"`
	InstanceCount types.Int64  `tfsdk:"instance_count"`
	Zone          types.String `tfsdk:"zone"`
	StartTime     types.String `tfsdk:"start_time"`
	EndTime       types.String `tfsdk:"end_time"`
	DurationHours types.Int64  `tfsdk:"duration_hours"`
	UpfrontFee    types.String `tfsdk:"upfront_fee"`
	OnDemandFee   types.String `tfsdk:"on_demand_fee"`
	Currency      types.String `tfsdk:"currency"`
	ExpiresAt     types.String `tfsdk:"expires_at"`
	Alternative   types.Bool   `tfsdk:"alternative"`
}

func (d *offeringsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_offerings"
}

func (d *offeringsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Capacity block offerings that fit the criteria, best first; an empty list when nothing fits. Offerings are quotes that expire within minutes: capblock_block searches again when it buys.",
		Attributes: map[string]schema.Attribute{
			"instance_types":     schema.ListAttribute{Required: true, ElementType: types.StringType, Description: "Instance types to search, e.g. [\"h100.8x\"]."},
			"instance_count":     schema.Int64Attribute{Required: true, Description: "Number of instances."},
			"duration_hours":     schema.Int64Attribute{Optional: true, Description: "Duration in hours (or min/max_duration_hours)."},
			"min_duration_hours": schema.Int64Attribute{Optional: true},
			"max_duration_hours": schema.Int64Attribute{Optional: true},
			"start_after":        schema.StringAttribute{Optional: true, Description: "Earliest start (RFC 3339)."},
			"end_before":         schema.StringAttribute{Optional: true, Description: "Latest end (RFC 3339)."},
			"zone":               schema.StringAttribute{Optional: true},
			"max_results":        schema.Int64Attribute{Optional: true, Description: "Most offerings returned; the server's default (6) when unset."},
			"offerings": schema.ListNestedAttribute{Computed: true, NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"id":             schema.StringAttribute{Computed: true, Description: "The offering's id (cbo-…)."},
				"instance_type":  schema.StringAttribute{Computed: true},
				"instance_count": schema.Int64Attribute{Computed: true},
				"zone":           schema.StringAttribute{Computed: true},
				"start_time":     schema.StringAttribute{Computed: true},
				"end_time":       schema.StringAttribute{Computed: true},
				"duration_hours": schema.Int64Attribute{Computed: true},
				"upfront_fee":    schema.StringAttribute{Computed: true, Description: "Price of the block, a decimal amount."},
				"on_demand_fee":  schema.StringAttribute{Computed: true, Description: "What the same hours cost on demand."},
				"currency":       schema.StringAttribute{Computed: true},
				"expires_at":     schema.StringAttribute{Computed: true, Description: "When the quote expires."},
				"alternative":    schema.BoolAttribute{Computed: true, Description: "Of another duration than the one asked for."},
			}}},
		},
	}
}

func (d *offeringsDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.client = clientOf(req.ProviderData, &resp.Diagnostics)
}

func (d *offeringsDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	if unconfigured(d.client, &resp.Diagnostics) {
		return
	}
	var m offeringsModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	q := client.OfferingsQuery{
		InstanceTypes:    stringList(ctx, m.InstanceTypes, &resp.Diagnostics),
		InstanceCount:    int(m.InstanceCount.ValueInt64()),
		DurationHours:    int(m.DurationHours.ValueInt64()),
		MinDurationHours: int(m.MinDurationHours.ValueInt64()),
		MaxDurationHours: int(m.MaxDurationHours.ValueInt64()),
		StartAfter:       parseTime(m.StartAfter, path.Root("start_after"), &resp.Diagnostics),
		EndBefore:        parseTime(m.EndBefore, path.Root("end_before"), &resp.Diagnostics),
		Zone:             m.Zone.ValueString(),
		MaxResults:       int(m.MaxResults.ValueInt64()),
	}
	if resp.Diagnostics.HasError() {
		return
	}
	offers, err := d.client.Offerings(ctx, q)
	if err != nil {
		resp.Diagnostics.AddError("Searching capacity block offerings", err.Error())
		return
	}
	m.Offerings = make([]offeringModel, len(offers))
	for i, o := range offers {
		m.Offerings[i] = offeringModel{
			ID: types.StringValue(o.OfferingID), InstanceType: types.StringValue(o.InstanceType),
			InstanceCount: types.Int64Value(int64(o.InstanceCount)), Zone: types.StringValue(o.Zone),
			StartTime: timeValue(o.StartTime), EndTime: timeValue(o.EndTime), DurationHours: types.Int64Value(int64(o.DurationHours)),
			UpfrontFee: types.StringValue(o.UpfrontFee.Amount), OnDemandFee: types.StringValue(o.OnDemandFee.Amount),
			Currency: types.StringValue(o.UpfrontFee.Currency), ExpiresAt: timeValue(o.ExpiresAt), Alternative: types.BoolValue(o.Alternative),
		}
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
