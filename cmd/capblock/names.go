package main

import (
	"context"

	"capblock/internal/client"
)

// teamNames returns the names of the teams the caller can list, by id.
// Tables show a team by its name; when the teams cannot be listed, they
// show its id, which is as good a key, so a failure is no error.
func teamNames(ctx context.Context, c *client.Client) map[string]string {
	teams, err := c.Teams(ctx)
	if err != nil {
		return nil
	}
	names := make(map[string]string, len(teams))
	for _, t := range teams {
		names[t.ID] = t.Name
	}
	return names
}

// userNames is teamNames for users.
func userNames(ctx context.Context, c *client.Client) map[string]string {
	users, err := c.Users(ctx)
	if err != nil {
		return nil
	}
	names := make(map[string]string, len(users))
	for _, u := range users {
		names[u.ID] = u.Name
	}
	return names
}

// nameOf is the name of id in names, or id when it has none there.
func nameOf(names map[string]string, id string) string {
	if n := names[id]; n != "" {
		return n
	}
	return id
}
