package api

import (
	"reflect"
	"slices"

	"github.com/danielgtaylor/huma/v2"
)

// completeEmbedded adds to each schema in the document the fields of the
// unexported structs its Go type embeds (blockDetailJSON embeds
// blockJSON): encoding/json writes and reads them as the outer type's own
// fields, but huma leaves unexported embedded fields out of the schema.
func completeEmbedded(api huma.API) {
	registry := api.OpenAPI().Components.Schemas
	before := map[string]bool{}
	for name := range registry.Map() {
		before[name] = true
	}
	defer dropUnused(api, before)
	for name, s := range registry.Map() {
		if !before[name] {
			continue
		}
		t := registry.TypeFromRef("#/components/schemas/" + name)
		if t == nil || t.Kind() != reflect.Struct || s.Type != huma.TypeObject {
			continue
		}
		changed := false
		for _, f := range embeddedUnexported(t) {
			inner := registry.Schema(f, false, "")
			for inner != nil && inner.Ref != "" {
				inner = registry.SchemaFromRef(inner.Ref)
			}
			if inner == nil {
				continue
			}
			for prop, ps := range inner.Properties {
				if _, ok := s.Properties[prop]; ok {
					continue // the outer type's own field wins, as in encoding/json
				}
				if s.Properties == nil {
					s.Properties = map[string]*huma.Schema{}
				}
				s.Properties[prop] = ps
				if slices.Contains(inner.Required, prop) {
					s.Required = append(s.Required, prop)
				}
				changed = true
			}
		}
		if changed {
			s.PrecomputeMessages()
		}
	}
}

// embeddedUnexported are the struct types of t's embedded fields that
// huma skips: unexported, untagged, structs.
func embeddedUnexported(t reflect.Type) []reflect.Type {
	var out []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.Anonymous || f.IsExported() || f.Tag.Get("json") != "" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct {
			out = append(out, ft)
		}
	}
	return out
}

// dropUnused removes the schemas that completeEmbedded registered by
// reading an embedded type (Cash, NodeHealth) and that no other schema
// refers to; no operation can, having been declared before.
func dropUnused(api huma.API, before map[string]bool) {
	schemas := api.OpenAPI().Components.Schemas.Map()
	for {
		used := map[string]bool{}
		for _, s := range schemas {
			refsOf(s, used, map[*huma.Schema]bool{})
		}
		dropped := false
		for name := range schemas {
			if !before[name] && !used["#/components/schemas/"+name] {
				delete(schemas, name)
				dropped = true
			}
		}
		if !dropped {
			return
		}
	}
}

// refsOf adds the references in s, at any depth, to used.
func refsOf(s *huma.Schema, used map[string]bool, seen map[*huma.Schema]bool) {
	if s == nil || seen[s] {
		return
	}
	seen[s] = true
	if s.Ref != "" {
		used[s.Ref] = true
	}
	refsOf(s.Items, used, seen)
	refsOf(s.Not, used, seen)
	if a, ok := s.AdditionalProperties.(*huma.Schema); ok {
		refsOf(a, used, seen)
	}
	for _, p := range s.Properties {
		refsOf(p, used, seen)
	}
	for _, list := range [][]*huma.Schema{s.AllOf, s.AnyOf, s.OneOf} {
		for _, p := range list {
			refsOf(p, used, seen)
		}
	}
}
