package tfprovider

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"capblock/internal/client"
)

// clientOf is the client the provider configured, or nil while it is not
// configured yet (a plan whose provider settings are still unknown).
func clientOf(data any, diags *diag.Diagnostics) *client.Client {
	if data == nil {
		return nil
	}
	c, ok := data.(*client.Client)
	if !ok {
		diags.AddError("Unexpected provider data", fmt.Sprintf("expected *client.Client, got %T", data))
		return nil
	}
	return c
}

// isNotFound tells whether the server answered that the thing does not
// exist (or belongs to another team, which reads the same).
func isNotFound(err error) bool {
	var p *client.Problem
	return errors.As(err, &p) && (p.Code == "not_found" || p.Status == http.StatusNotFound)
}

// isInvalidState tells whether the server refused an action for the state
// its subject is in.
func isInvalidState(err error) bool {
	var p *client.Problem
	return errors.As(err, &p) && p.Code == "invalid_state"
}

// parseTime reads an RFC 3339 attribute; p names it in the error.
func parseTime(v types.String, p path.Path, diags *diag.Diagnostics) time.Time {
	if v.IsNull() || v.IsUnknown() {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, v.ValueString())
	if err != nil {
		diags.AddAttributeError(p, "Invalid time", fmt.Sprintf("%s %q is not an RFC 3339 time; write it like 2026-12-02T00:00:00Z", p, v.ValueString()))
		return time.Time{}
	}
	return t.UTC()
}

// timeValue writes t as Terraform sees it: RFC 3339 in UTC.
func timeValue(t time.Time) types.String {
	if t.IsZero() {
		return types.StringNull()
	}
	return types.StringValue(t.UTC().Format(time.RFC3339))
}

// keepTime returns old when it names the same instant as t (a time the
// configuration wrote with another offset keeps its spelling), else t.
func keepTime(old types.String, t time.Time) types.String {
	if !old.IsNull() && !old.IsUnknown() {
		if o, err := time.Parse(time.RFC3339, old.ValueString()); err == nil && o.Equal(t) {
			return old
		}
	}
	return timeValue(t)
}

// keepAmount returns old when it is the same decimal as amount ("5000"
// and "5000.00"), else amount.
func keepAmount(old types.String, amount string) types.String {
	if !old.IsNull() && !old.IsUnknown() {
		a, okA := new(big.Rat).SetString(old.ValueString())
		b, okB := new(big.Rat).SetString(amount)
		if okA && okB && a.Cmp(b) == 0 {
			return old
		}
	}
	return types.StringValue(amount)
}

// optionalString is s, or null when s is empty and the prior value was
// null (the server's empty answer to an attribute never set).
func optionalString(old types.String, s string) types.String {
	if s == "" && old.IsNull() {
		return types.StringNull()
	}
	return types.StringValue(s)
}

// stringMap converts a Terraform map of strings; null is nil.
func stringMap(ctx context.Context, m types.Map, diags *diag.Diagnostics) map[string]string {
	if m.IsNull() || m.IsUnknown() {
		return nil
	}
	out := map[string]string{}
	diags.Append(m.ElementsAs(ctx, &out, false)...)
	return out
}

// mapValue is m as a Terraform map; an empty m keeps a null prior value
// null.
func mapValue(old types.Map, m map[string]string) types.Map {
	if len(m) == 0 && old.IsNull() {
		return types.MapNull(types.StringType)
	}
	elems := make(map[string]attr.Value, len(m))
	for k, v := range m {
		elems[k] = types.StringValue(v)
	}
	return types.MapValueMust(types.StringType, elems)
}

// stringList converts a Terraform list of strings.
func stringList(ctx context.Context, l types.List, diags *diag.Diagnostics) []string {
	if l.IsNull() || l.IsUnknown() {
		return nil
	}
	var out []string
	diags.Append(l.ElementsAs(ctx, &out, false)...)
	return out
}

// listValue is s as a Terraform list of strings.
func listValue(s []string) types.List {
	elems := make([]attr.Value, len(s))
	for i, v := range s {
		elems[i] = types.StringValue(v)
	}
	return types.ListValueMust(types.StringType, elems)
}

// unconfigured reports, with an error, that the provider has no client:
// its endpoint or token are not known until another resource is applied.
func unconfigured(c *client.Client, diags *diag.Diagnostics) bool {
	if c != nil {
		return false
	}
	diags.AddError("The capblock provider is not configured",
		"Its endpoint or token comes from a value not known yet; give them values known at plan time (or CAPBLOCK_URL and CAPBLOCK_TOKEN).")
	return true
}
