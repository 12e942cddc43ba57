package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// usersDisableCmd is `capblock users disable|enable USER`.
func (a *app) usersDisableCmd(disabled bool) *cobra.Command {
	verb := disableVerb(disabled)
	short := "Disable a user: their tokens and access keys stop working until enabled (admin)"
	if !disabled {
		short = "Enable a disabled user again: their tokens and access keys work again (admin)"
	}
	return &cobra.Command{
		Use:   verb + " USER",
		Short: short + " (USER: its id or name)",
		Args:  exactlyOne("user id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			id, err := userID(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			u, err := c.SetUserDisabled(cmd.Context(), id, disabled)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(u)
			}
			fmt.Fprintf(a.stdout, "user %s (%s) is %sd\n", u.Name, u.ID, verb)
			return nil
		},
	}
}

// teamsDisableCmd is `capblock teams disable|enable TEAM`.
func (a *app) teamsDisableCmd(disabled bool) *cobra.Command {
	verb := disableVerb(disabled)
	short := "Disable a team: its users' tokens stop working and nothing is bought for it; what it bought runs on (admin)"
	if !disabled {
		short = "Enable a disabled team again (admin)"
	}
	return &cobra.Command{
		Use:   verb + " TEAM",
		Short: short + " (TEAM: its id or name)",
		Args:  exactlyOne("team id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			id, err := teamID(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			t, err := c.SetTeamDisabled(cmd.Context(), id, disabled)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(t)
			}
			fmt.Fprintf(a.stdout, "team %s (%s) is %sd\n", t.Name, t.ID, verb)
			return nil
		},
	}
}

func disableVerb(disabled bool) string {
	if disabled {
		return "disable"
	}
	return "enable"
}

// enabledState is how tables show whether a user or a team is enabled.
func enabledState(disabledAt *time.Time) string {
	if disabledAt == nil {
		return "enabled"
	}
	return "disabled " + fmtTime(*disabledAt)
}
