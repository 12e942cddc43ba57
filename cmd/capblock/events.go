package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"capblock/internal/client"
)

// pollWait is how long one long poll of --follow waits on the server.
const pollWait = 30 * time.Second

// minPollGap keeps --follow from spinning on a server that answers an
// empty long poll at once.
const minPollGap = time.Second

func (a *app) eventsCmd() *cobra.Command {
	var (
		after, until string
		follow       bool
	)
	cmd := &cobra.Command{
		Use:   "events [--after CURSOR] [-f] [--until TYPE]",
		Short: "Print the events of your blocks, plans and jobs",
		Long: `Print events (block.active, block.expiration-warning, …) one per line:
time, type, subject and data. Without --follow it prints what is there and
the cursor to pass as --after next time; with --follow it keeps waiting for
new events until Ctrl-C, or with --until TYPE until it has printed an event
of that type. With -o json, --follow prints one JSON event a line.`,
		Example: `  capblock events
  capblock events -f
  capblock events -f --until block.active    # wait for a block to start`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if follow || until != "" {
				return a.followEvents(cmd.Context(), c, after, until)
			}
			page, err := c.Events(cmd.Context(), after, 0)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(page)
			}
			for _, e := range page.Events {
				if err := a.printEvent(e); err != nil {
					return err
				}
			}
			if page.Next != "" {
				a.note("next: capblock events --after %s", page.Next)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&after, "after", "", "print only events after this cursor")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events until interrupted")
	cmd.Flags().StringVar(&until, "until", "", "follow until an event of this type (e.g. block.expired) is printed")
	return cmd
}

// followEvents long-polls until ctx is cancelled, which ends it cleanly,
// or until it has printed an event of type until (when not empty).
func (a *app) followEvents(ctx context.Context, c *client.Client, after, until string) error {
	for {
		started := time.Now()
		page, err := c.Events(ctx, after, pollWait)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		for _, e := range page.Events {
			if err := a.printEvent(e); err != nil {
				return err
			}
			if until != "" && e.Type == until {
				return nil
			}
		}
		if page.Next != "" {
			after = page.Next
		}
		if len(page.Events) == 0 && time.Since(started) < minPollGap {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(minPollGap):
			}
		}
	}
}

// printEvent writes one event as one line: JSON with -o json, otherwise
// "time  type  subject  data". Both are escaped (printableJSON, printable):
// the event's fields come from the server.
func (a *app) printEvent(e client.Event) error {
	if a.jsonOutput() {
		data, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("encoding event %s: %w", e.ID, err)
		}
		_, err = fmt.Fprintf(a.stdout, "%s\n", printableJSON(data))
		return err
	}
	line := fmt.Sprintf("%s  %-26s %s", e.Time.UTC().Format(time.RFC3339), e.Type, e.Subject)
	if len(e.Data) > 0 {
		data, err := json.Marshal(e.Data)
		if err != nil {
			return fmt.Errorf("encoding the data of event %s: %w", e.ID, err)
		}
		line += "  " + string(data)
	}
	_, err := fmt.Fprintln(a.stdout, printable(line))
	if err != nil {
		return fmt.Errorf("writing event: %w", err)
	}
	return nil
}
