package tfprovider_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"capblock/internal/client"
)

var simStart = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// stackConfig is a team with a quota, a budget and a webhook, a block and
// a training plan bought for it; blockEnd, when set, is the block's
// end_time, and extra is appended.
func stackConfig(blockEnd, extra string) string {
	end := ""
	if blockEnd != "" {
		end = fmt.Sprintf("  end_time       = %q\n", blockEnd)
	}
	return `terraform {
  required_providers {
    capblock = { source = "capblock/capblock" }
  }
}

provider "capblock" {}

resource "capblock_team" "research" {
  name = "research"
}

resource "capblock_quota" "research" {
  team                    = capblock_team.research.id
  max_instances_per_block = 8
  max_duration_hours      = 240
}

resource "capblock_budget" "research" {
  team   = capblock_team.research.id
  amount = "50000"
  period = "month"
}

resource "capblock_webhook" "research" {
  team   = capblock_team.research.id
  url    = "http://127.0.0.1:9/capblock"
  events = ["block.*"]
}

resource "capblock_block" "train" {
  team           = capblock_team.research.id
  instance_type  = "h100.8x"
  instance_count = 2
  duration_hours = 24
  start_after    = "2026-12-02T00:00:00Z"
  end_before     = "2026-12-06T00:00:00Z"
  name           = "train"
  tags           = { project = "llm" }
` + end + `}

resource "capblock_plan" "finetune" {
  team           = capblock_team.research.id
  instance_type  = "a100.8x"
  instance_count = 1
  duration_hours = 48
  start_after    = "2026-12-03T00:00:00Z"
  end_before     = "2026-12-12T00:00:00Z"
  name           = "finetune"
}

data "capblock_offerings" "l4" {
  instance_types = ["l4.1x"]
  instance_count = 1
  duration_hours = 4
  start_after    = "2026-12-02T00:00:00Z"
  end_before     = "2026-12-03T00:00:00Z"
}

output "team"           { value = capblock_team.research.id }
output "block_id"       { value = capblock_block.train.id }
output "block_end"      { value = capblock_block.train.end_time }
output "block_state"    { value = capblock_block.train.state }
output "plan_id"        { value = capblock_plan.finetune.id }
output "webhook_id"     { value = capblock_webhook.research.id }
output "webhook_secret" {
  value     = capblock_webhook.research.secret
  sensitive = true
}
output "l4_offerings"   { value = length(data.capblock_offerings.l4.offerings) }
` + extra
}

// TestTerraform drives the provider with a real Terraform CLI against a
// real server: apply buys a block and a plan and sets up a team, then
// changes nothing a second time; a later end extends the same block; an
// imported block plans no change; destroy cancels the blocks.
func TestTerraform(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server and the provider and runs a Terraform CLI")
	}
	cli := terraformCLI(t)
	providerDir := buildProvider(t)
	srv := startServer(t, simStart)
	ctx := context.Background()
	w := newWorkspace(t, cli, providerDir, srv)

	// 1. Apply the stack, and check it through the API.
	w.write(stackConfig("", ""))
	w.must("apply", "-auto-approve")
	var out struct {
		Team, BlockID, BlockEnd, BlockState, PlanID, WebhookID, WebhookSecret string
		L4Offerings                                                           int
	}
	w.outputs(&out)
	b, err := srv.api.Block(ctx, out.BlockID)
	if err != nil {
		t.Fatal(err)
	}
	if b.Team != out.Team || b.InstanceType != "h100.8x" || b.InstanceCount != 2 || b.DurationHours != 24 || b.Name != "train" ||
		b.Tags["project"] != "llm" || b.State != "scheduled" || b.StartTime.Before(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("block bought: %+v", b)
	}
	if !b.EndTime.Equal(mustTime(t, out.BlockEnd)) || out.BlockState != b.State {
		t.Errorf("outputs say end %s state %s, the API %s %s", out.BlockEnd, out.BlockState, b.EndTime, b.State)
	}
	ledger, err := srv.api.Ledger(ctx, out.Team)
	if err != nil {
		t.Fatal(err)
	}
	if ledger.Budget == nil || ledger.Budget.Period != "month" || ledger.Budget.Amount.Amount != "50000.00" {
		t.Errorf("budget of %s: %+v", out.Team, ledger.Budget)
	}
	quotas, err := srv.api.Quotas(ctx, out.Team)
	if err != nil || len(quotas) != 1 || quotas[0].MaxInstancesPerBlock != 8 || quotas[0].MaxDurationHours != 240 {
		t.Errorf("quotas of %s: %+v, %v", out.Team, quotas, err)
	}
	plan, err := srv.api.Plan(ctx, out.PlanID)
	if err != nil || plan.Team != out.Team || plan.Name != "finetune" || len(plan.Segments) == 0 {
		t.Errorf("plan %s: %+v, %v", out.PlanID, plan, err)
	}
	if hook := findWebhook(t, srv.api, out.WebhookID); hook == nil || hook.Team != out.Team || out.WebhookSecret == "" {
		t.Errorf("webhook %s: %+v, secret given: %t", out.WebhookID, hook, out.WebhookSecret != "")
	}
	if out.L4Offerings == 0 {
		t.Error("the offerings data source found no l4.1x offering")
	}

	// 2. Nothing changed: a second plan has nothing to do.
	w.noChanges("after the first apply")

	// 3. A later end extends the same block.
	newEnd := b.EndTime.Add(12 * time.Hour)
	w.write(stackConfig(newEnd.Format(time.RFC3339), ""))
	w.must("apply", "-auto-approve")
	extended, err := srv.api.Block(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !extended.EndTime.Equal(newEnd) || !extended.StartTime.Equal(b.StartTime) || extended.State != "scheduled" {
		t.Errorf("after the extension block %s runs %s–%s (%s), want %s–%s", b.ID, extended.StartTime, extended.EndTime, extended.State, b.StartTime, newEnd)
	}
	w.outputs(&out)
	if out.BlockID != b.ID || !mustTime(t, out.BlockEnd).Equal(newEnd) {
		t.Errorf("after the extension the state holds block %s ending %s, want %s ending %s", out.BlockID, out.BlockEnd, b.ID, newEnd)
	}
	w.noChanges("after the extension")

	// 4. A block bought with the API, imported, plans no change.
	other := buyL4(t, srv.api)
	imported := fmt.Sprintf(`
resource "capblock_block" "imported" {
  instance_type  = "l4.1x"
  instance_count = 1
  duration_hours = 24
  start_after    = %q
  end_before     = %q
}
`, other.StartTime.Format(time.RFC3339), other.EndTime.Format(time.RFC3339))
	w.write(stackConfig(newEnd.Format(time.RFC3339), imported))
	w.must("import", "capblock_block.imported", other.ID)
	w.noChanges("after the import")

	// 5. A wider window that the imported block still fits is only written
	// down; one it does not fit, or an earlier end, replaces the block.
	wider := strings.Replace(imported, other.StartTime.Format(time.RFC3339), "2026-12-01T12:00:00Z", 1)
	w.write(stackConfig(newEnd.Format(time.RFC3339), wider))
	if plan, code := w.run("plan", "-detailed-exitcode"); code != 2 || !strings.Contains(plan, "updated in-place") || strings.Contains(plan, "replace") {
		t.Errorf("a wider window: plan exited %d, want an in-place update and no replacement\n%s", code, plan)
	}
	w.must("apply", "-auto-approve")
	w.noChanges("after writing down the wider window")
	narrower := strings.Replace(wider, "2026-12-01T12:00:00Z", other.StartTime.Add(time.Hour).Format(time.RFC3339), 1)
	w.write(stackConfig(b.EndTime.Format(time.RFC3339), narrower))
	replan, code := w.run("plan", "-detailed-exitcode")
	for _, want := range []string{"capblock_block.imported must be replaced", "capblock_block.train must be replaced"} {
		if code != 2 || !strings.Contains(replan, want) {
			t.Errorf("a window the block misses and an earlier end: plan exited %d, want %q\n%s", code, want, replan)
		}
	}
	w.write(stackConfig(newEnd.Format(time.RFC3339), wider))

	// 6. Destroy cancels both blocks and the plan and takes the budget and
	// the webhook away; the team, which the API cannot delete, stays.
	destroyed := w.must("destroy", "-auto-approve")
	for _, id := range []string{b.ID, other.ID} {
		if got, err := srv.api.Block(ctx, id); err != nil || got.State != "cancelled" {
			t.Errorf("after destroy block %s is %q (%v), want cancelled", id, got.State, err)
		}
	}
	if ledger, err := srv.api.Ledger(ctx, out.Team); err != nil || ledger.Budget != nil && ledger.Budget.Period != "none" {
		t.Errorf("after destroy the budget of %s is %+v (%v), want none", out.Team, ledger.Budget, err)
	}
	if hook := findWebhook(t, srv.api, out.WebhookID); hook != nil {
		t.Errorf("after destroy webhook %s remains", out.WebhookID)
	}
	if _, err := srv.api.Team(ctx, out.Team); err != nil {
		t.Errorf("the team is gone: %v", err)
	}
	if p, err := srv.api.Plan(ctx, out.PlanID); err != nil || p.State != "cancelled" {
		t.Errorf("after destroy plan %s is %q (%v), want cancelled", out.PlanID, p.State, err)
	}
	if warning := "Team research (" + out.Team + ") is not deleted"; !strings.Contains(destroyed, warning) {
		t.Errorf("destroy did not warn %q:\n%s", warning, destroyed)
	}
}

// buyL4 buys a 24-hour l4.1x block for the admin's own team through the
// API.
func buyL4(t *testing.T, api *client.Client) client.Block {
	t.Helper()
	ctx := context.Background()
	offers, err := api.Offerings(ctx, client.OfferingsQuery{InstanceTypes: []string{"l4.1x"}, InstanceCount: 1, DurationHours: 24,
		StartAfter: time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC), EndBefore: time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)})
	if err != nil || len(offers) == 0 {
		t.Fatalf("searching l4.1x offerings: %d, %v", len(offers), err)
	}
	b, err := api.Buy(ctx, client.BuyRequest{OfferingID: offers[0].OfferingID, ClientToken: "imported-l4"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func findWebhook(t *testing.T, api *client.Client, id string) *client.Webhook {
	t.Helper()
	hooks, err := api.Webhooks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hooks {
		if h.ID == id {
			return &h
		}
	}
	return nil
}

// outputs decodes `output -json` into the fields of v, named as the
// outputs in CamelCase.
func (w *workspace) outputs(v any) {
	w.t.Helper()
	var raw map[string]struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal([]byte(w.must("output", "-json")), &raw); err != nil {
		w.t.Fatal(err)
	}
	values := map[string]json.RawMessage{}
	for name, o := range raw {
		values[strings.ReplaceAll(name, "_", "")] = o.Value
	}
	data, _ := json.Marshal(values)
	if err := json.Unmarshal(data, v); err != nil { // field names match case-insensitively
		w.t.Fatalf("decoding the outputs %s: %v", data, err)
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return v
}
