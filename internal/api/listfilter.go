package api

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
)

// listFilter is what the list operations' state, team and tag parameters
// keep. It is applied to what the service answered, which is already
// what the caller may see: a filter narrows that and never widens it (a
// member filtering by another team gets nothing).
type listFilter struct {
	states []string          // any of them; all when empty
	team   string            // this team's id; all when empty
	tags   map[string]string // every one of them
}

// keep reports whether a thing in state, of team, with tags passes f.
func (f listFilter) keep(state, team string, tags map[string]string) bool {
	if len(f.states) > 0 && !slices.Contains(f.states, state) {
		return false
	}
	if f.team != "" && team != f.team {
		return false
	}
	for k, v := range f.tags {
		if got, ok := tags[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// onlyState is the one state f keeps, for a service that filters by one
// state itself; empty when f keeps any or several.
func (f listFilter) onlyState() string {
	if len(f.states) == 1 {
		return f.states[0]
	}
	return ""
}

// parseTagFilter reads tag parameters, each key=value, reporting at
// query.tag[i] one that is not.
func parseTagFilter(values []string) (map[string]string, []error) {
	var errs []error
	tags := map[string]string{}
	for i, s := range values {
		loc := fmt.Sprintf("query.tag[%d]", i)
		k, v, ok := strings.Cut(s, "=")
		switch {
		case !ok || k == "":
			errs = append(errs, &huma.ErrorDetail{Location: loc, Message: "expected a tag as key=value, such as env=prod", Value: s})
		case utf8.RuneCountInString(k) > maxTagKeyLen:
			errs = append(errs, &huma.ErrorDetail{Location: loc, Message: fmt.Sprintf("expected a tag key of at most %d characters", maxTagKeyLen), Value: s})
		case utf8.RuneCountInString(v) > maxTagValueLen:
			errs = append(errs, &huma.ErrorDetail{Location: loc, Message: fmt.Sprintf("expected a tag value of at most %d characters", maxTagValueLen), Value: s})
		default:
			if old, dup := tags[k]; dup && old != v {
				errs = append(errs, &huma.ErrorDetail{Location: loc, Message: fmt.Sprintf("tag %s is given twice with other values: no block has both", k), Value: s})
			}
			tags[k] = v
		}
	}
	return tags, errs
}
