package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/telemetry"
)

// The delivery worker tails the events from its stored cursor and, for
// each event, schedules a delivery to every webhook of the event's team
// that matches it (an Attempt 0 line of the delivery log) before it moves
// the cursor past the event. One sender per webhook then POSTs its
// deliveries in event order, retrying each with exponential backoff, and
// logs every attempt. After a restart the worker resumes what the log
// shows unfinished, so every scheduled delivery is attempted until it
// ends, at least once.
//
// Deliveries are network I/O: their times, their backoff and the time
// they are signed with follow the wall clock, even when the service runs
// on a simulated one (a receiver checks the signature's time against its
// own clock). Which events a webhook gets, though, is decided in the
// service's time: those at or after its creation.

// WebhookOptions tune the delivery worker; zero fields take the defaults.
type WebhookOptions struct {
	// Client sends the deliveries. The default waits 10s for an answer,
	// follows no redirect (a 3xx is a failed attempt) and connects only
	// to public addresses unless the service allows others
	// (Config.AllowPrivateWebhooks).
	Client *http.Client
	// FirstRetry is the wait after a delivery's first failed attempt (1s);
	// each failure doubles it, up to MaxRetry (5m).
	FirstRetry, MaxRetry time.Duration
	// MaxAttempts is how many attempts a delivery gets before the worker
	// gives up on it (8: over about two minutes with the default waits).
	MaxAttempts int
	// Poll is how often the worker looks for events when no commit of
	// this process wakes it (5s).
	Poll time.Duration
	// Gather is how long the worker, woken by a commit, waits for more
	// before it reads the events (50ms), so that a burst of purchases
	// costs one pass instead of one each.
	Gather time.Duration
	// Retention is how long the delivery log keeps a finished delivery
	// (Config.WebhookLogRetention, else 30 days); PruneEvery is how often
	// the worker removes older ones (1h), first when it starts.
	Retention, PruneEvery time.Duration
}

func (o WebhookOptions) withDefaults(allowPrivate bool, retention time.Duration) WebhookOptions {
	if o.Client == nil {
		o.Client = deliveryClient(allowPrivate)
	}
	if o.Retention <= 0 {
		o.Retention = retention
	}
	if o.PruneEvery <= 0 {
		o.PruneEvery = time.Hour
	}
	if o.FirstRetry <= 0 {
		o.FirstRetry = time.Second
	}
	if o.MaxRetry <= 0 {
		o.MaxRetry = 5 * time.Minute
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 8
	}
	if o.Poll <= 0 {
		o.Poll = 5 * time.Second
	}
	if o.Gather <= 0 {
		o.Gather = 50 * time.Millisecond
	}
	return o
}

// webhookPage is how many events the worker schedules at a time.
const webhookPage = 500

// startWebhooks runs the delivery worker until the returned stop is
// called, which waits for it to end. Run starts it while this replica
// leads, so that only one replica delivers.
func (s *Service) startWebhooks(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.RunWebhooks(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// RunWebhooks delivers events to the webhooks until ctx ends, with the
// default options.
func (s *Service) RunWebhooks(ctx context.Context) { s.RunWebhooksWith(ctx, WebhookOptions{}) }

// RunWebhooksWith delivers events to the webhooks until ctx ends, and
// returns once its senders have stopped. On a store that replicas share,
// run it on one replica at a time (Run does, on the leader).
func (s *Service) RunWebhooksWith(ctx context.Context, opts WebhookOptions) {
	w := &webhookWorker{svc: s, opts: opts.withDefaults(s.allowPrivateWebhooks, s.webhookLogRetention), senders: map[string]*webhookSender{}}
	defer w.wg.Wait()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.prune(ctx)
	}()
	// 1. Resume the deliveries that the log shows unfinished.
	var cursor int64
	for {
		var err error
		if cursor, err = w.resume(ctx); err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Error("loading the unfinished webhook deliveries", "err", err)
		if !sleepCtx(ctx, w.opts.Poll) {
			return
		}
	}
	// 2. Schedule the events that follow the cursor, as they come.
	for {
		changed := s.eventsChanged()
		next, more, err := w.schedule(ctx, cursor)
		cursor = next
		if err != nil && ctx.Err() == nil {
			s.log.Error("scheduling webhook deliveries", "after", cursor, "err", err)
		}
		if more && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
			if !sleepCtx(ctx, w.opts.Gather) {
				return
			}
		case <-time.After(w.opts.Poll):
		}
	}
}

// defaultWebhookLogRetention is how long the delivery log keeps a
// finished delivery unless the operator says otherwise.
const defaultWebhookLogRetention = 30 * 24 * time.Hour

// prune removes the finished deliveries older than the retention from the
// log, now and then every PruneEvery, until ctx ends.
func (w *webhookWorker) prune(ctx context.Context) {
	for {
		n, err := w.svc.store.PruneDeliveries(ctx, time.Now().Add(-w.opts.Retention))
		switch {
		case err != nil && ctx.Err() == nil:
			w.svc.log.Error("pruning the webhook delivery log", "err", err)
		case n > 0:
			w.svc.log.Info("pruned the webhook delivery log", "lines", n, "finished before", time.Now().Add(-w.opts.Retention).Round(time.Second))
		}
		if !sleepCtx(ctx, w.opts.PruneEvery) {
			return
		}
	}
}

// webhookWorker holds a sender per webhook with deliveries to make.
type webhookWorker struct {
	svc  *Service
	opts WebhookOptions
	wg   sync.WaitGroup

	mu      sync.Mutex
	senders map[string]*webhookSender
}

// resume queues the unfinished deliveries of the log and returns the
// cursor.
func (w *webhookWorker) resume(ctx context.Context) (int64, error) {
	cursor, err := w.svc.store.WebhookCursor(ctx)
	if err != nil {
		return 0, err
	}
	pending, err := w.svc.store.PendingDeliveries(ctx)
	if err != nil {
		return 0, err
	}
	now := time.Now()
	for _, d := range pending {
		due := d.NextAt
		if due.IsZero() {
			due = now
		}
		w.enqueue(ctx, d.Webhook, delivery{seq: d.EventSeq, eventID: d.EventID, attempt: d.Attempt + 1, due: due})
	}
	return cursor, nil
}

// schedule schedules the deliveries of up to a page of events after the
// cursor, and returns the new cursor and whether more events may follow.
// An event is scheduled for a webhook once: a second Attempt 0 line is a
// conflict, which means an earlier run scheduled it and resume queued it.
func (w *webhookWorker) schedule(ctx context.Context, after int64) (cursor int64, more bool, err error) {
	st := w.svc.store
	hooks, err := st.ListWebhooks(ctx, "")
	if err != nil || len(hooks) == 0 {
		// Without webhooks there is nothing to schedule: the events wait
		// for the first, which gets only those from its creation on.
		return after, false, err
	}
	events, err := st.Events(ctx, "", after, webhookPage)
	if err != nil {
		return after, false, fmt.Errorf("reading events: %w", err)
	}
	cursor = after
	var failed error
events:
	for _, e := range events {
		for _, h := range hooks {
			if h.Team != e.Team || !h.Matches(e.Type) || e.Time.Before(h.CreatedAt) {
				continue
			}
			now := time.Now()
			err := st.AppendDelivery(ctx, core.Delivery{ID: newID("whd"), Webhook: h.ID, EventID: e.ID, EventSeq: e.Seq,
				Time: now, NextAt: now})
			switch {
			case err == nil:
				w.enqueue(ctx, h.ID, delivery{seq: e.Seq, eventID: e.ID, event: &e, attempt: 1, due: now})
			case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
				// Scheduled before, or the webhook is gone.
			default:
				failed = err
				break events
			}
		}
		cursor = e.Seq
	}
	if cursor != after {
		if err := st.SetWebhookCursor(ctx, cursor); err != nil {
			return after, false, errors.Join(failed, err)
		}
	}
	return cursor, failed == nil && len(events) == webhookPage, failed
}

// enqueue adds a delivery to the queue of its webhook's sender, starting
// the sender if it is not running.
func (w *webhookWorker) enqueue(ctx context.Context, webhookID string, d delivery) {
	w.mu.Lock()
	defer w.mu.Unlock()
	snd, ok := w.senders[webhookID]
	if !ok {
		snd = &webhookSender{webhook: webhookID, wake: make(chan struct{}, 1)}
		w.senders[webhookID] = snd
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.send(ctx, snd)
		}()
	}
	snd.push(d)
}

// retire forgets the sender of a deleted webhook.
func (w *webhookWorker) retire(snd *webhookSender) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.senders[snd.webhook] == snd {
		delete(w.senders, snd.webhook)
	}
}

// delivery is one event still to be delivered to a webhook.
type delivery struct {
	seq     int64
	eventID string
	event   *core.Event // nil until loaded (after a restart)
	attempt int         // the next attempt's number
	due     time.Time
}

// webhookSender is the queue of one webhook's deliveries, in event order.
type webhookSender struct {
	webhook string
	wake    chan struct{}

	mu    sync.Mutex
	queue []delivery
}

func (snd *webhookSender) push(d delivery) {
	snd.mu.Lock()
	snd.queue = append(snd.queue, d)
	snd.mu.Unlock()
	select {
	case snd.wake <- struct{}{}:
	default:
	}
}

func (snd *webhookSender) head() (delivery, bool) {
	snd.mu.Lock()
	defer snd.mu.Unlock()
	if len(snd.queue) == 0 {
		return delivery{}, false
	}
	return snd.queue[0], true
}

// finish replaces the head with next, or drops it when next is nil.
func (snd *webhookSender) finish(next *delivery) {
	snd.mu.Lock()
	defer snd.mu.Unlock()
	if next != nil {
		snd.queue[0] = *next
		return
	}
	snd.queue[0] = delivery{}
	snd.queue = snd.queue[1:]
}

// send makes the deliveries of one webhook, one at a time, until ctx ends
// or the webhook is deleted. A delivery that fails waits for its retry
// before the next starts, so that a receiver sees its events in order.
func (w *webhookWorker) send(ctx context.Context, snd *webhookSender) {
	log := w.svc.log.With("webhook", snd.webhook)
	for {
		// 1. Wait for the head of the queue to be due.
		d, ok := snd.head()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-snd.wake:
			}
			continue
		}
		if !sleepCtx(ctx, time.Until(d.due)) {
			return
		}
		// 2. Load the webhook, which may have changed or gone, and the event.
		hook, err := w.svc.store.Webhook(ctx, snd.webhook)
		if errors.Is(err, store.ErrNotFound) {
			w.retire(snd)
			return
		}
		if err == nil && d.event == nil {
			d.event, err = w.loadEvent(ctx, d.seq)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Error("preparing a webhook delivery", "event", d.eventID, "err", err)
			if !sleepCtx(ctx, w.opts.FirstRetry) {
				return
			}
			continue
		}
		// 3. Attempt it and log the attempt.
		line := w.attempt(ctx, hook, d)
		if ctx.Err() != nil {
			return // cut short by the end of the lead: attempted again later
		}
		if line.Error != "" {
			log.Warn("webhook delivery failed", "event", d.eventID, "attempt", d.attempt, "status", line.Status,
				"error", line.Error, "done", line.Done)
		}
		err = w.svc.store.AppendDelivery(ctx, line)
		switch {
		case errors.Is(err, store.ErrNotFound):
			w.retire(snd)
			return
		case err != nil && !errors.Is(err, store.ErrConflict) && ctx.Err() == nil:
			log.Error("logging a webhook delivery attempt", "event", d.eventID, "attempt", d.attempt, "err", err)
		}
		if line.Done {
			snd.finish(nil)
			continue
		}
		d.attempt, d.due = d.attempt+1, line.NextAt
		snd.finish(&d)
	}
}

// loadEvent reads the event with sequence number seq.
func (w *webhookWorker) loadEvent(ctx context.Context, seq int64) (*core.Event, error) {
	events, err := w.svc.store.Events(ctx, "", seq-1, 1)
	if err != nil {
		return nil, fmt.Errorf("reading event %d: %w", seq, err)
	}
	if len(events) == 0 || events[0].Seq != seq {
		return nil, fmt.Errorf("event %d is not stored", seq)
	}
	return &events[0], nil
}

// attempt POSTs the event to the webhook once and returns the log line of
// the attempt: done when the receiver answered 2xx or no attempt is left.
func (w *webhookWorker) attempt(ctx context.Context, hook core.Webhook, d delivery) core.Delivery {
	body, err := webhookBody(*d.event)
	sent := time.Now()
	line := core.Delivery{ID: newID("whd"), Webhook: hook.ID, EventID: d.eventID, EventSeq: d.seq, Attempt: d.attempt, Time: sent}
	if err == nil {
		line.Status, err = w.post(ctx, hook, d.event.Type, body, sent)
	}
	switch {
	case err == nil:
		line.Done = true
		return line
	case d.attempt >= w.opts.MaxAttempts:
		line.Error = fmt.Sprintf("%v; gave up after %d attempts", err, d.attempt)
		line.Done = true
	default:
		line.Error = err.Error()
		line.NextAt = sent.Add(core.RetryDelay(d.attempt, w.opts.FirstRetry, w.opts.MaxRetry))
	}
	return line
}

// post sends one signed delivery and returns the answer's status; an
// error when none came back or it was not 2xx. The error never holds the
// URL (which may hold a credential) nor the secret.
func (w *webhookWorker) post(ctx context.Context, hook core.Webhook, eventType string, body []byte, at time.Time) (_ int, err error) {
	// The delivery's span, whose W3C trace context the receiver gets.
	ctx, end := traced(ctx, "webhook.deliver", trace.SpanKindClient, attribute.String("capblock.webhook", hook.ID),
		attribute.String("capblock.event.type", eventType))
	defer end(&err)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.URL, bytes.NewReader(body))
	if err != nil {
		return 0, errors.New("the webhook's URL cannot be requested")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "capblock-webhooks/1")
	req.Header.Set("Capblock-Event", eventType)
	secret, err := w.svc.webhookSecret(hook)
	if err != nil {
		return 0, err
	}
	req.Header.Set(core.SignatureHeader, core.SignPayload(secret, at, body))
	telemetry.Headers(ctx, req.Header.Set)
	resp, err := w.opts.Client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return 0, fmt.Errorf("no answer: %v", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	return resp.StatusCode, nil
}

// webhookEvent is the body of a delivery: the event as GET /v1/events
// shows it.
type webhookEvent struct {
	ID      string         `json:"id"`
	Time    time.Time      `json:"time"`
	Type    string         `json:"type"`
	Subject string         `json:"subject"`
	Team    string         `json:"team"`
	Data    map[string]any `json:"data"`
}

func webhookBody(e core.Event) ([]byte, error) {
	data := e.Data
	if data == nil {
		data = map[string]any{}
	}
	body, err := json.Marshal(webhookEvent{ID: e.ID, Time: e.Time.UTC(), Type: e.Type, Subject: e.Subject, Team: e.Team, Data: data})
	if err != nil {
		return nil, fmt.Errorf("encoding event %s: %w", e.ID, err)
	}
	return body, nil
}

// sleepCtx waits for d and reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
