package api

import (
	"context"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// Tag limits of a block.
const (
	maxTags        = 50
	maxTagKeyLen   = 128
	maxTagValueLen = 256
)

// registerBlocks declares "Capacity blocks": search, purchase, and what can
// be done with a block afterwards.
func (s *server) registerBlocks(api huma.API) {
	huma.Register(api, s.operation("searchOfferings", http.MethodGet, "/v1/offerings", "blocks",
		"Search priced offerings for a capacity block, best first"), s.searchOfferings)

	registerPurchase(api, s.operation("purchaseBlock", http.MethodPost, "/v1/blocks", "blocks",
		"Buy an offering; the same clientToken again returns the same block"), "block", s.purchase)

	huma.Register(api, s.operation("listBlocks", http.MethodGet, "/v1/blocks", "blocks",
		"List the team's blocks"), s.listBlocks)
	huma.Register(api, s.operation("getBlock", http.MethodGet, "/v1/blocks/{id}", "blocks",
		"Get a block, with the hours it handed on or received and its utilisation so far"), s.getBlock)
	huma.Register(api, s.operation("cancelBlock", http.MethodPost, "/v1/blocks/{id}/cancel", "blocks",
		"Cancel a block, or release it early; refunded per the operator's policy"), s.cancelBlock)
	huma.Register(api, s.operation("approveBlock", http.MethodPost, "/v1/blocks/{id}/approve", "blocks",
		"Approve a block waiting in payment-pending under the approval policy (admin)"), s.approveBlock)
	huma.Register(api, s.operation("listExtensionOfferings", http.MethodGet, "/v1/blocks/{id}/extension-offerings", "blocks",
		"Search offerings that extend a block"), s.extensionOfferings)
	huma.Register(api, s.operation("extendBlock", http.MethodPost, "/v1/blocks/{id}/extensions", "blocks",
		"Buy an extension offering; the block keeps its id and ends later"), s.extend)
	huma.Register(api, s.operation("getBlockStatus", http.MethodGet, "/v1/blocks/{id}/status", "blocks",
		"Capacity and placement of a block, and its engine actions"), s.blockStatus)
	s.registerHandOn(api)
}

type offeringsInput struct {
	InstanceType     []string `query:"instanceType,explode" required:"true" minItems:"1" doc:"One or more instance types; repeat the parameter."`
	InstanceCount    int      `query:"instanceCount" required:"true" minimum:"1" maximum:"1000000"`
	DurationHours    int      `query:"durationHours" minimum:"1" maximum:"1000000" doc:"Exact duration; or give minDurationHours and maxDurationHours."`
	MinDurationHours int      `query:"minDurationHours" minimum:"1" maximum:"1000000"`
	MaxDurationHours int      `query:"maxDurationHours" minimum:"1" maximum:"1000000"`
	StartAfter       string   `query:"startAfter" required:"true" format:"date-time" doc:"Earliest start (RFC 3339)."`
	EndBefore        string   `query:"endBefore" required:"true" format:"date-time" doc:"Latest end (RFC 3339)."`
	Zone             string   `query:"zone" doc:"One zone; all zones when empty."`
	MaxResults       int      `query:"maxResults" minimum:"1" maximum:"50" default:"6"`
	Team             string   `query:"team" maxLength:"64" doc:"An admin searching for another team names it here (its id): that team's quota bounds the offerings, as its purchase would be bounded."`
}

// Resolve checks the parameters that go together. A parameter that is
// absent is zero, since huma rejects an explicit 0 (minimum 1).
func (in *offeringsInput) Resolve(huma.Context) []error {
	var errs []error
	add := func(loc, format string, args ...any) {
		errs = append(errs, &huma.ErrorDetail{Location: loc, Message: fmt.Sprintf(format, args...)})
	}
	for i, t := range in.InstanceType {
		if t == "" {
			add(fmt.Sprintf("query.instanceType[%d]", i), "expected a non-empty instance type")
		}
	}
	fixed := in.DurationHours != 0
	ranged := in.MinDurationHours != 0 || in.MaxDurationHours != 0
	switch {
	case fixed && ranged:
		add("query.durationHours", "give either durationHours or minDurationHours and maxDurationHours, not both")
	case !fixed && !ranged:
		add("query.durationHours", "durationHours (or minDurationHours and maxDurationHours) is required")
	case ranged && in.MinDurationHours == 0:
		add("query.minDurationHours", "minDurationHours is required with maxDurationHours")
	case ranged && in.MaxDurationHours == 0:
		add("query.maxDurationHours", "maxDurationHours is required with minDurationHours")
	case ranged && in.MinDurationHours > in.MaxDurationHours:
		add("query.maxDurationHours", "maxDurationHours must be at least minDurationHours")
	}
	return append(errs, checkRange("query.endBefore", "endBefore", in.StartAfter, in.EndBefore, "startAfter")...)
}

// searchOfferings searches for the caller's team, or the team an admin
// names: offerings respect that team's quota.
func (s *server) searchOfferings(ctx context.Context, in *offeringsInput) (*out[offeringsJSON], error) {
	team := s.teamFor(ctx, in.Team)
	req := core.SearchRequest{
		Types:       in.InstanceType,
		Count:       in.InstanceCount,
		Duration:    hours(in.DurationHours),
		MinDuration: hours(in.MinDurationHours),
		MaxDuration: hours(in.MaxDurationHours),
		StartAfter:  parseTime(in.StartAfter),
		EndBefore:   parseTime(in.EndBefore),
		Zone:        in.Zone,
		MaxResults:  in.MaxResults,
		Team:        team,
	}
	offerings, err := s.svc.Offerings(ctx, req)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toOfferings(offerings))
}

type purchaseRequestJSON struct {
	OfferingID  string            `json:"offeringId" minLength:"1" maxLength:"4096" doc:"An offering id (cbo-…) from GET /v1/offerings."`
	ClientToken string            `json:"clientToken" minLength:"1" maxLength:"64" doc:"Idempotency key: the same token returns the same block."`
	Name        string            `json:"name,omitempty" maxLength:"128"`
	Tags        map[string]string `json:"tags,omitempty" maxProperties:"50" doc:"Up to 50 tags; keys up to 128 characters, values up to 256."`
	Team        string            `json:"team,omitempty" maxLength:"64" doc:"An admin buying for another team names it here (its id)."`
}

type purchaseInput struct {
	Body purchaseRequestJSON
}

// Resolve checks the tags, which the schema bounds only in number.
func (in *purchaseInput) Resolve(huma.Context) []error {
	if len(in.Body.Tags) > maxTags {
		return nil // reported by huma (maxProperties)
	}
	var errs []error
	for k, v := range in.Body.Tags {
		loc := "body.tags." + k
		switch n := utf8.RuneCountInString(k); {
		case n == 0:
			errs = append(errs, &huma.ErrorDetail{Location: "body.tags", Message: "expected non-empty tag keys"})
		case n > maxTagKeyLen:
			errs = append(errs, &huma.ErrorDetail{Location: loc, Message: fmt.Sprintf("expected a tag key of at most %d characters", maxTagKeyLen)})
		}
		if utf8.RuneCountInString(v) > maxTagValueLen {
			errs = append(errs, &huma.ErrorDetail{Location: loc, Message: fmt.Sprintf("expected a tag value of at most %d characters", maxTagValueLen)})
		}
	}
	return errs
}

func (s *server) purchase(ctx context.Context, in *purchaseInput) (*purchaseOutput[blockJSON], error) {
	team := s.teamFor(ctx, in.Body.Team)
	b, created, err := s.svc.Purchase(ctx, contract.PurchaseRequest{
		Team:        team,
		OfferingID:  in.Body.OfferingID,
		ClientToken: in.Body.ClientToken,
		Name:        in.Body.Name,
		Tags:        in.Body.Tags,
	})
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return purchased(toBlock(b), created), nil
}

type listBlocksInput struct {
	State []string `query:"state,explode" enum:"payment-pending,scheduled,active,expired,payment-failed,cancelled,failed" doc:"Only blocks in these states (repeat the parameter); all when absent."`
	Team  string   `query:"team" maxLength:"64" doc:"Only this team's blocks (its id). A team outside the caller's scope has none to show: a filter never widens what the caller may see."`
	Tag   []string `query:"tag,explode" doc:"Only blocks with this tag, written key=value (repeat the parameter: every one must match)."`

	tags map[string]string
}

func (in *listBlocksInput) Resolve(huma.Context) []error {
	var errs []error
	in.tags, errs = parseTagFilter(in.Tag)
	return errs
}

func (s *server) listBlocks(ctx context.Context, in *listBlocksInput) (*out[blocksJSON], error) {
	f := listFilter{states: in.State, team: in.Team, tags: in.tags}
	blocks, err := s.svc.ListBlocks(ctx, scopeOf(ctx), core.BlockState(f.onlyState()))
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := blocksJSON{Blocks: make([]blockJSON, 0, len(blocks))}
	for _, b := range blocks {
		if j := toBlock(b); f.keep(j.State, j.Team, j.Tags) {
			resp.Blocks = append(resp.Blocks, j)
		}
	}
	return reply(resp)
}

type blockIDInput struct {
	ID string `path:"id" example:"cb-01HZX" doc:"Block id."`
}

func (s *server) cancelBlock(ctx context.Context, in *blockIDInput) (*out[blockJSON], error) {
	b, err := s.svc.CancelBlock(ctx, scopeOf(ctx), in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toBlock(b))
}

type extensionOfferingsInput struct {
	ID            string `path:"id" doc:"Block id."`
	DurationHours int    `query:"durationHours" required:"true" minimum:"1" maximum:"1000000" doc:"Hours to add to the block."`
}

func (s *server) extensionOfferings(ctx context.Context, in *extensionOfferingsInput) (*out[offeringsJSON], error) {
	offerings, err := s.svc.ExtensionOfferings(ctx, scopeOf(ctx), in.ID, hours(in.DurationHours))
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toOfferings(offerings))
}

type extendRequestJSON struct {
	OfferingID string `json:"offeringId" minLength:"1" maxLength:"4096" doc:"An extension offering id (cbe-…). Bought again for the same block, it answers the block as it extended it, charged once."`
}

type extendInput struct {
	ID   string `path:"id" doc:"Block id."`
	Body extendRequestJSON
}

func (s *server) extend(ctx context.Context, in *extendInput) (*out[blockJSON], error) {
	x, err := s.svc.Extend(ctx, scopeOf(ctx), in.ID, in.Body.OfferingID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toBlock(x.Block))
}

func (s *server) blockStatus(ctx context.Context, in *blockIDInput) (*out[blockStatusJSON], error) {
	st, err := s.svc.BlockStatus(ctx, scopeOf(ctx), in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toBlockStatus(st))
}

func (s *server) approveBlock(ctx context.Context, in *blockIDInput) (*out[blockJSON], error) {
	b, err := s.svc.ApproveBlock(ctx, in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toBlock(b))
}
