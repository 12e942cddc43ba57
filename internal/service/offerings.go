package service

import (
	"context"
	"fmt"

	"capblock/internal/core"
)

// searchQuotas is team's effective quota of each type searched, by type
// name; nil for no team. An unknown type is left to the search to refuse.
func (s *Service) searchQuotas(ctx context.Context, team string, types []string) (map[string]core.Quota, error) {
	if team == "" {
		return nil, nil
	}
	quotas := make(map[string]core.Quota, len(types))
	for _, name := range types {
		if _, ok := s.fleet.Type(name); !ok {
			continue
		}
		q, err := s.effectiveQuota(ctx, team, name)
		if err != nil {
			return nil, fmt.Errorf("searching offerings: %w", err)
		}
		quotas[name] = q
	}
	return quotas, nil
}
