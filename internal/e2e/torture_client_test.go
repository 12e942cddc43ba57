package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// tortureRun is the clients of a torture run and the history they
// record: what they asked, when, and what they saw.
type tortureRun struct {
	cluster *tortureCluster
	http    *http.Client
	token   string      // the administrator's, whose team buys
	windows []time.Time // the windows' starts; each lasts windowHours
	start   time.Time   // history times are nanoseconds since
	endOps  time.Time   // no operation starts after
	giveUp  time.Time   // an ambiguous operation is retried until

	mu          sync.Mutex
	ops         []porcupine.Operation
	terms       map[string]bookingTerms // every token a purchase was sent under
	acked       map[string]string       // token → block, purchases acknowledged
	refused     map[string]bool         // purchases refused for want of capacity
	cancelTried map[string]bool         // tokens whose block a client tried to cancel
	cancelled   map[string]bool         // tokens whose cancel was acknowledged
	counts      map[string]int          // requests and outcomes, by name
	problems    []string                // answers no client should see
}

const (
	windowHours  = 6
	tortureNodes = 4 // whole-node instances sold in each hour
)

// tortureFleet is one zone of tortureNodes H100 nodes, sold whole.
var tortureFleet = fmt.Sprintf(`
currency: USD
instanceTypes:
  - {name: h100.8x, gpuModel: H100, gpusPerInstance: 8, onDemandPrice: "98.32"}
zones:
  - name: zone-a
    racks:
      - name: r1
        nodeGroups:
          - {prefix: h100-, count: %d, gpuModel: H100, gpus: 8}
`, tortureNodes)

func (r *tortureRun) now() int64 { return int64(time.Since(r.start)) }

func (r *tortureRun) count(name string) {
	r.mu.Lock()
	r.counts[name]++
	r.mu.Unlock()
}

func (r *tortureRun) problem(format string, args ...any) {
	r.mu.Lock()
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *tortureRun) record(op porcupine.Operation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
	in, out := op.Input.(bookingInput), op.Output.(bookingOutput)
	r.counts[in.op.String()+" "+out.outcome.String()]++
}

// do sends one request to the replica at base and reads the whole
// answer; err is set when no whole answer came back.
func (r *tortureRun) do(base, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// ambiguous reports whether an answer leaves the outcome open: no
// answer, a server error, or a conflict that the server asks to retry.
func ambiguous(status int, code string, err error) bool {
	return err != nil || status >= 500 || status == http.StatusTooManyRequests || (status == http.StatusConflict && code == "conflict")
}

// attempt is one request of an operation: the replica that answered,
// when it was sent (nanoseconds into the run), and the answer.
type attempt struct {
	replica      string
	at           int64
	status       int // 0: no answer
	code, detail string
}

// attempts are an operation's requests, kept as its metadata in the
// history.
type attempts []attempt

func (as attempts) String() string {
	var b strings.Builder
	for i, a := range as {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s at %.6fs: %d %s", a.replica, time.Duration(a.at).Seconds(), a.status, a.code)
		if a.code == "no_capacity" {
			fmt.Fprintf(&b, " (%s)", a.detail)
		}
	}
	return b.String()
}

// tortureClient is one client: it buys, cancels what it bought, and
// reads, each request to a random replica, one operation at a time.
type tortureClient struct {
	r    *tortureRun
	id   int
	rng  *mathrand.Rand
	n    int        // purchases so far, for tokens
	live []ownBlock // bought and not yet cancelled
	all  []ownBlock // bought
}

type ownBlock struct{ token, id string }

func (c *tortureClient) run() {
	for time.Now().Before(c.r.endOps) && !c.r.cluster.stopped() {
		switch p := c.rng.IntN(100); {
		case p < 40:
			c.purchase()
		case p < 65 && len(c.live) > 0:
			c.cancel()
		case p < 85:
			c.list()
		case len(c.all) > 0:
			c.get()
		default:
			c.purchase()
		}
		time.Sleep(time.Duration(c.rng.IntN(20)) * time.Millisecond) // a client's pace, not a wait for a state
	}
}

// replica returns a random replica that is up, waiting while none is,
// until the run gives up ("").
func (c *tortureClient) replica() string {
	for {
		if url := c.r.cluster.pick(c.rng); url != "" {
			return url
		}
		if time.Now().After(c.r.giveUp) || c.r.cluster.stopped() {
			return ""
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// retryPause is the pause before the attempt after attempt.
func (c *tortureClient) retryPause(attempt int) {
	limit := min(50*time.Millisecond<<min(attempt, 4), time.Second)
	time.Sleep(time.Duration(c.rng.Int64N(int64(limit))))
}

// purchase searches one window for offerings and buys one of them.
func (c *tortureClient) purchase() {
	w := c.rng.IntN(len(c.r.windows))
	count := 1
	if c.rng.IntN(10) < 3 {
		count = 2
	}
	hours := 1 + c.rng.IntN(3)
	from, to := c.r.windows[w], c.r.windows[w].Add(windowHours*time.Hour)
	url := c.replica()
	if url == "" {
		return
	}
	c.r.count("search")
	status, data, err := c.r.do(url, "GET", "/v1/offerings?"+searchQuery("h100.8x", count, hours, from, to)+"&zone=zone-a", nil)
	var found struct{ Offerings []offering }
	if err != nil || status != 200 || json.Unmarshal(data, &found) != nil {
		c.r.count("search failed")
		return
	}
	var fit []offering
	for _, o := range found.Offerings {
		if !o.StartTime.Before(from) && !o.EndTime.After(to) {
			fit = append(fit, o)
		} else {
			c.r.problem("search of %s..%s offered %s..%s", ts(from), ts(to), ts(o.StartTime), ts(o.EndTime))
		}
	}
	if len(fit) == 0 {
		c.r.count("search empty")
		return
	}
	o := fit[c.rng.IntN(len(fit))]
	token := fmt.Sprintf("c%02d-%04d", c.id, c.n)
	c.n++
	c.r.mu.Lock()
	c.r.terms[token] = bookingTerms{window: w, count: o.InstanceCount,
		start: int(o.StartTime.Sub(from) / time.Hour), end: int(o.EndTime.Sub(from) / time.Hour)}
	c.r.mu.Unlock()
	call := c.r.now()
	out, id, where := c.buy(o, token)
	ret := c.r.now()
	if out == outcomeUnknown {
		ret = never
	}
	c.r.record(porcupine.Operation{ClientId: c.id, Input: bookingInput{op: opPurchase, token: token},
		Call: call, Output: bookingOutput{outcome: out}, Return: ret, Metadata: where})
	c.r.mu.Lock()
	switch out {
	case outcomeOK:
		c.r.acked[token] = id
	case outcomeRefused:
		c.r.refused[token] = true
	}
	c.r.mu.Unlock()
	if out == outcomeOK {
		c.live = append(c.live, ownBlock{token, id})
		c.all = append(c.all, ownBlock{token, id})
	}
}

// buy buys o under token, retrying with the same token, as a careful
// client does, while the answer leaves the outcome open. It returns the
// outcome, the block, and where the answers came from.
func (c *tortureClient) buy(o offering, token string) (outcome, string, attempts) {
	body := map[string]any{"offeringId": o.OfferingID, "clientToken": token, "name": token}
	var where attempts
	for n := 1; ; n++ {
		url := c.replica()
		if url == "" {
			return outcomeUnknown, "", where
		}
		c.r.count("purchase request")
		sent := c.r.now()
		status, data, err := c.r.do(url, "POST", "/v1/blocks", body)
		var answer struct {
			block
			Name, Code, Detail string
		}
		if err == nil {
			err = json.Unmarshal(data, &answer)
		}
		where = append(where, attempt{replica: c.r.cluster.name(url), at: sent, status: status, code: answer.Code, detail: answer.Detail})
		switch {
		case err == nil && (status == 201 || status == 200):
			if answer.Name != token || !answer.StartTime.Equal(o.StartTime) || !answer.EndTime.Equal(o.EndTime) || answer.InstanceCount != o.InstanceCount {
				c.r.problem("purchase %s answered block %s named %q, %s..%s × %d; asked %s..%s × %d", token, answer.ID,
					answer.Name, ts(answer.StartTime), ts(answer.EndTime), answer.InstanceCount, ts(o.StartTime), ts(o.EndTime), o.InstanceCount)
			}
			return outcomeOK, answer.ID, where
		case err == nil && status == 409 && answer.Code == "no_capacity":
			return outcomeRefused, "", where
		case ambiguous(status, answer.Code, err):
			c.r.count("purchase retry")
			if time.Now().After(c.r.giveUp) {
				return outcomeUnknown, "", where
			}
			c.retryPause(n)
		default:
			c.r.problem("purchase %s on %s: status %d %s: %s", token, url, status, answer.Code, answer.Detail)
			return outcomeUnknown, "", where
		}
	}
}

// cancel cancels one of the client's live blocks, retrying while the
// answer leaves the outcome open.
func (c *tortureClient) cancel() {
	i := c.rng.IntN(len(c.live))
	b := c.live[i]
	c.live = slices.Delete(c.live, i, i+1)
	c.r.mu.Lock()
	c.r.cancelTried[b.token] = true
	c.r.mu.Unlock()
	call := c.r.now()
	out := outcomeUnknown
	unsure := false // an earlier attempt may have cancelled it
	var where attempts
requests:
	for n := 1; ; n++ {
		url := c.replica()
		if url == "" {
			break
		}
		c.r.count("cancel request")
		sent := c.r.now()
		status, data, err := c.r.do(url, "POST", "/v1/blocks/"+b.id+"/cancel", nil)
		var answer struct {
			State, Code, Detail string
		}
		if err == nil {
			err = json.Unmarshal(data, &answer)
		}
		where = append(where, attempt{replica: c.r.cluster.name(url), at: sent, status: status, code: answer.Code, detail: answer.Detail})
		switch {
		case err == nil && status == 200:
			if answer.State != "cancelled" {
				c.r.problem("cancel of %s (%s) answered state %q", b.id, b.token, answer.State)
			}
			out = outcomeOK
		case err == nil && status == 409 && answer.Code == "invalid_state":
			// Cancelled already: by an earlier attempt of this cancel,
			// or, when there was none, by nobody the model knows of.
			out = outcomeRefused
			if unsure {
				out = outcomeOK
			}
		case ambiguous(status, answer.Code, err):
			c.r.count("cancel retry")
			unsure = true
			if time.Now().After(c.r.giveUp) {
				break requests
			}
			c.retryPause(n)
			continue
		default:
			c.r.problem("cancel of %s (%s) on %s: status %d %s: %s", b.id, b.token, url, status, answer.Code, answer.Detail)
		}
		break
	}
	ret := c.r.now()
	if out == outcomeUnknown {
		ret = never
	}
	c.r.record(porcupine.Operation{ClientId: c.id, Input: bookingInput{op: opCancel, token: b.token},
		Call: call, Output: bookingOutput{outcome: out}, Return: ret, Metadata: where})
	if out == outcomeOK {
		c.r.mu.Lock()
		c.r.cancelled[b.token] = true
		c.r.mu.Unlock()
	}
}

// get reads one of the client's blocks. A read that gets no answer
// changes nothing and is left out of the history.
func (c *tortureClient) get() {
	b := c.all[c.rng.IntN(len(c.all))]
	url := c.replica()
	if url == "" {
		return
	}
	call := c.r.now()
	status, data, err := c.r.do(url, "GET", "/v1/blocks/"+b.id, nil)
	ret := c.r.now()
	var got block
	switch {
	case err == nil && status == 200 && json.Unmarshal(data, &got) == nil:
	case err == nil && status == 404:
		c.r.problem("get of acknowledged block %s (%s) on %s: not found", b.id, b.token, url)
	default:
		c.r.count("get failed")
		return
	}
	c.r.record(porcupine.Operation{ClientId: c.id, Input: bookingInput{op: opGet, token: b.token},
		Call: call, Output: bookingOutput{live: got.State == "scheduled"}, Return: ret, Metadata: attempts{{replica: c.r.cluster.name(url), at: call, status: status}}})
}

// list reads every scheduled block of the team.
func (c *tortureClient) list() {
	url := c.replica()
	if url == "" {
		return
	}
	if !c.r.listOn(c.id, url) {
		c.r.count("list failed")
	}
}

// listOn reads the scheduled blocks on the replica at url and records
// the read as client's; it reports whether an answer came.
func (r *tortureRun) listOn(client int, url string) bool {
	call := r.now()
	status, data, err := r.do(url, "GET", "/v1/blocks?state=scheduled", nil)
	ret := r.now()
	var got struct {
		Blocks []struct{ ID, Name string }
	}
	if err != nil || status != 200 || json.Unmarshal(data, &got) != nil {
		return false
	}
	var tokens []string
	r.mu.Lock()
	for _, b := range got.Blocks {
		if _, asked := r.terms[b.Name]; !asked {
			r.problems = append(r.problems, fmt.Sprintf("a list on %s shows block %s named %q, which no client bought", url, b.ID, b.Name))
			continue
		}
		tokens = append(tokens, b.Name)
	}
	r.mu.Unlock()
	slices.Sort(tokens)
	r.record(porcupine.Operation{ClientId: client, Input: bookingInput{op: opList},
		Call: call, Output: bookingOutput{tokens: tokens}, Return: ret, Metadata: attempts{{replica: r.cluster.name(url), at: call, status: status}}})
	return true
}
