package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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
		filter       eventFilter
	)
	cmd := &cobra.Command{
		Use:   "events [--after CURSOR] [-f] [--until TYPE] [--type TYPE] [--subject ID|NAME]",
		Short: "Print the events of your blocks, plans and jobs",
		Long: `Print events (block.active, block.expiration-warning, …) one per line under
a header: time, type, subject, the event's id and its data. Without
--follow it prints what is there and the cursor to pass as --after next
time; with --follow it keeps waiting for new events until Ctrl-C, or with
--until TYPE until an event of that type comes. --type (block.active, or
block.* for a family) and --subject (a block's, plan's, job's, series' or
order's id, or its name) print only the events that match. With -o json,
--follow prints one JSON event a line.`,
		Example: `  capblock events
  capblock events --type 'job.*'
  capblock events --subject cb-… -f
  capblock events -f --until block.active    # wait for a block to start`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if filter.subject != "" {
				if filter.subject, err = subjectID(cmd.Context(), c, filter.subject); err != nil {
					return fmt.Errorf("--subject: %w", err)
				}
			}
			if follow || until != "" {
				return a.followEvents(cmd.Context(), c, after, until, filter)
			}
			page, err := c.Events(cmd.Context(), after, 0)
			if err != nil {
				return err
			}
			page.Events = filter.keep(page.Events)
			if a.jsonOutput() {
				return a.printJSON(page)
			}
			if len(page.Events) == 0 {
				a.note("no events%s", filter.says())
			} else {
				a.printEventHeader()
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
	cmd.Flags().StringVar(&until, "until", "", "follow until an event of this type (e.g. block.expired) comes")
	cmd.Flags().StringVar(&filter.typ, "type", "", "only events of this type (block.active), or family (block.*)")
	cmd.Flags().StringVar(&filter.subject, "subject", "", "only events of this block, plan, job, series or order (its id or its name)")
	return cmd
}

// eventFilter is what --type and --subject keep.
type eventFilter struct{ typ, subject string }

// match reports whether e is kept: its type is typ, or starts with the
// family of a typ that ends in ".*"; its subject is subject.
func (f eventFilter) match(e client.Event) bool {
	if f.subject != "" && e.Subject != f.subject {
		return false
	}
	if family, ok := strings.CutSuffix(f.typ, "*"); ok {
		return strings.HasPrefix(e.Type, family)
	}
	return f.typ == "" || e.Type == f.typ
}

// keep returns the events that match.
func (f eventFilter) keep(events []client.Event) []client.Event {
	kept := events[:0:0]
	for _, e := range events {
		if f.match(e) {
			kept = append(kept, e)
		}
	}
	return kept
}

// says is what the filter asks for, for a sentence: " of type block.* ".
func (f eventFilter) says() string {
	s := ""
	if f.typ != "" {
		s += " of type " + f.typ
	}
	if f.subject != "" {
		s += " of " + f.subject
	}
	return s
}

// followEvents long-polls until ctx is cancelled, which ends it cleanly,
// or until it has printed an event of type until (when not empty).
func (a *app) followEvents(ctx context.Context, c *client.Client, after, until string, filter eventFilter) error {
	if !a.jsonOutput() {
		a.printEventHeader()
	}
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
			if filter.match(e) {
				if err := a.printEvent(e); err != nil {
					return err
				}
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

// eventColumns lays out an event's line; its columns are wide enough for
// the service's ids, so that lines printed one at a time line up.
const eventColumns = "%-16s  %-26s %-22s %-22s %s"

// eventDataColumn is where the data starts on an event's line: the
// widths of eventColumns before it.
const eventDataColumn = 16 + 2 + 26 + 1 + 22 + 1 + 22 + 1

// printEventHeader writes the header of the lines printEvent writes.
func (a *app) printEventHeader() {
	if a.noHeaders {
		return
	}
	fmt.Fprintln(a.stdout, strings.TrimRight(fmt.Sprintf(eventColumns, "TIME ("+zoneLabel()+")", "TYPE", "SUBJECT", "EVENT", "DATA"), " "))
}

// printEvent writes one event as one line: JSON with -o json (a YAML
// document with -o yaml, the template's output with -o jsonpath), otherwise
// time, type, subject, id and data under printEventHeader's header, cut
// to maxTableWidth but with -o wide. Both are escaped (printableJSON,
// printable): the event's fields come from the server.
func (a *app) printEvent(e client.Event) error {
	if a.jsonOutput() {
		if err := a.printEventData(a.stdout, e); err != nil {
			return fmt.Errorf("printing event %s: %w", e.ID, err)
		}
		return nil
	}
	data := ""
	if len(e.Data) > 0 {
		raw, err := json.Marshal(e.Data)
		if err != nil {
			return fmt.Errorf("encoding the data of event %s: %w", e.ID, err)
		}
		data = string(raw)
	}
	typ, subject, id, data := printable(e.Type), printable(e.Subject), printable(e.ID), printable(data)
	if !a.wideOutput() {
		// Lines are printed one at a time, so the columns are cut to
		// their widths, and the data to what is left of maxTableWidth.
		typ, subject, id = clip(typ, 26), clip(subject, 22), clip(id, 22)
		data = clip(data, maxTableWidth-eventDataColumn)
	}
	line := strings.TrimRight(fmt.Sprintf(eventColumns, fmtTime(e.Time), typ, subject, id, data), " ")
	_, err := fmt.Fprintln(a.stdout, line)
	if err != nil {
		return fmt.Errorf("writing event: %w", err)
	}
	return nil
}
