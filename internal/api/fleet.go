package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
)

// registerFleet declares "Fleet and prices": instance types, nodes and the
// availability calendar.
func (s *server) registerFleet(api huma.API) {
	huma.Register(api, s.operation("listInstanceTypes", http.MethodGet, "/v1/instance-types", "fleet",
		"List the instance types on sale, with on-demand prices per instance-hour"), s.listInstanceTypes)
	huma.Register(api, s.operation("listNodes", http.MethodGet, "/v1/nodes", "fleet",
		"List the fleet's nodes with their health"), s.listNodes)
	huma.Register(api, s.operation("getAvailability", http.MethodGet, "/v1/availability", "fleet",
		"Free instances of a type per hour, for calendars"), s.availability)
}

func (s *server) listInstanceTypes(ctx context.Context, _ *struct{}) (*out[instanceTypesJSON], error) {
	fleet, err := s.svc.Fleet(ctx)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := instanceTypesJSON{InstanceTypes: make([]instanceTypeJSON, 0, len(fleet.Types))}
	for _, t := range fleet.Types {
		zones := fleet.Zones(t.GPUModel)
		if zones == nil {
			zones = []string{}
		}
		resp.InstanceTypes = append(resp.InstanceTypes, instanceTypeJSON{
			Name:            t.Name,
			GPUModel:        t.GPUModel,
			GPUsPerInstance: t.GPUsPerInstance,
			OnDemandPrice:   toMoney(t.OnDemand),
			Zones:           zones,
			AWSNames:        t.AWSNames,
		})
	}
	return reply(resp)
}

func (s *server) listNodes(ctx context.Context, _ *struct{}) (*out[nodesJSON], error) {
	nodes, err := s.svc.Nodes(ctx)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := nodesJSON{Nodes: make([]nodeJSON, 0, len(nodes))}
	for _, v := range nodes {
		n := v.Node
		resp.Nodes = append(resp.Nodes, nodeJSON{
			Name:           n.Name,
			Zone:           n.Zone,
			Rack:           n.Rack,
			GPUModel:       n.GPUModel,
			GPUs:           n.GPUs,
			Health:         string(n.Health),
			nodeHealthJSON: toNodeHealth(v.Record),
			Labels:         orEmpty(n.Labels),
		})
	}
	return reply(resp)
}

type availabilityInput struct {
	InstanceType string `query:"instanceType" required:"true" minLength:"1" example:"h100.8x"`
	Zone         string `query:"zone" doc:"One zone; all zones summed when empty."`
	From         string `query:"from" required:"true" format:"date-time" doc:"Start of the first hour (RFC 3339)."`
	To           string `query:"to" required:"true" format:"date-time" doc:"End of the range, exclusive (RFC 3339)."`
}

// Resolve checks what one parameter alone cannot say.
func (in *availabilityInput) Resolve(huma.Context) []error {
	return checkRange("query.to", "to", in.From, in.To, "from")
}

func (s *server) availability(ctx context.Context, in *availabilityInput) (*out[slotsJSON], error) {
	from, to := parseTime(in.From), parseTime(in.To)
	slots, err := s.svc.Availability(ctx, in.InstanceType, in.Zone, from, to)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := slotsJSON{Slots: make([]slotJSON, 0, len(slots))}
	for _, sl := range slots {
		resp.Slots = append(resp.Slots, slotJSON{Start: sl.Start.UTC(), Free: sl.Free})
	}
	return reply(resp)
}
