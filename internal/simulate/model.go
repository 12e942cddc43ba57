package simulate

import (
	"capblock/internal/contract"
	"capblock/internal/core"
)

// model is the simulation's record of what the service acknowledged,
// and what it still must learn the outcome of: what a client would
// remember. The checker holds what was read of the store.
type model struct {
	blocks map[string]*blockRec
	// live are the blocks last known live, in the order the simulation
	// met them and took them out: what operations pick from.
	live   []string
	liveAt map[string]int
	// bought are the purchases acknowledged, for retries with their
	// client tokens; pending are the operations whose answer was an
	// injected fault, retried until an answer says what became of them.
	bought  []*purchase
	pending []*pendingOp
	// quotes are recent offerings, bought later (perhaps expired, or
	// taken by then).
	quotes []core.Offering
	plans  []*planRec
	tokens int
	// health is each node's health as the last acknowledged fail or
	// recover left it; missing are the nodes whose recorded failure is
	// the engine's word that they left its inventory (opInventory).
	health  map[string]core.Health
	missing map[string]bool
	// series are the series purchases acknowledged; orders the standing
	// orders acknowledged, in the order they were placed, and by id.
	series  []*seriesRec
	orders  []*orderRec
	orderAt map[string]*orderRec
	// waiting are the series purchases whose answer was a fault, retried
	// as pending ones are (they are kept apart from pending, whose
	// retries know the older kinds only).
	waiting []*pendingOp
}

// blockRec is what the simulation knows of a block.
type blockRec struct {
	// acked is the block as the last acknowledged operation on it
	// answered (zero when none did: a block met in the store); the
	// store must hold it or a later version.
	acked core.Block
	// cancelled: a cancellation of it was acknowledged.
	cancelled bool
}

// purchase is an acknowledged purchase, for retries.
type purchase struct {
	req   contract.PurchaseRequest
	block string
}

// planRec is an acknowledged plan purchase.
type planRec struct {
	id, team string
	req      contract.PlanPurchaseRequest
	segments []string
}

// pendingOp is an operation whose answer was a fault: retried as a
// client would, until an answer tells what became of it.
type pendingOp struct {
	kind string // "purchase", "plan", "extend", "cancel", "node", "team", "series"
	// purchase, plan and series: the request, retried as it was.
	buy    contract.PurchaseRequest
	plan   contract.PlanPurchaseRequest
	series contract.SeriesPurchaseRequest
	quote  core.Offering       // the purchase's quote
	pquote core.PlanOffering   // the plan's
	squote core.SeriesOffering // the series'
	// extend and cancel: the block (and the extension's quote).
	block string
	// node: the node and the health asked for; team: the team and
	// whether it is disabled.
	node     string
	health   core.Health
	disabled bool
	tries    int
}

func newModel() *model {
	return &model{blocks: map[string]*blockRec{}, liveAt: map[string]int{}, health: map[string]core.Health{}, missing: map[string]bool{},
		orderAt: map[string]*orderRec{}}
}

// learn records a block the service answered with; the record of a
// block met before is kept.
func (m *model) learn(b core.Block) *blockRec {
	r := m.blocks[b.ID]
	if r == nil {
		r = &blockRec{}
		m.blocks[b.ID] = r
	}
	m.acked(r, b)
	return r
}

// acked takes b as the last acknowledged view of r, if it is not older
// than the one held.
func (m *model) acked(r *blockRec, b core.Block) {
	if b.Version >= r.acked.Version {
		r.acked = b
	}
	m.setLive(b.ID, b.State.Live())
}

// setLive keeps the list of live blocks: a block leaves by a swap with
// the last, which depends only on the order of the steps.
func (m *model) setLive(id string, live bool) {
	i, in := m.liveAt[id]
	switch {
	case live && !in:
		m.liveAt[id] = len(m.live)
		m.live = append(m.live, id)
	case !live && in:
		last := m.live[len(m.live)-1]
		m.live[i], m.liveAt[last] = last, i
		m.live = m.live[:len(m.live)-1]
		delete(m.liveAt, id)
	}
}

// addQuote keeps an offering for a later purchase; the oldest go.
func (m *model) addQuote(o core.Offering) {
	if len(m.quotes) == 16 {
		m.quotes = append(m.quotes[:0], m.quotes[1:]...)
	}
	m.quotes = append(m.quotes, o)
}

// observe records a block as read from the store: so the simulation
// meets every block (a plan's segments, a transfer's, one whose
// purchase answer was lost) and picks from the live ones.
func (m *model) observe(b core.Block) {
	if m.blocks[b.ID] == nil {
		m.blocks[b.ID] = &blockRec{}
	}
	m.setLive(b.ID, b.State.Live())
}

// pendingNode reports whether a fail or recover of node waits for its
// outcome.
func (m *model) pendingNode(node string) bool {
	for _, p := range m.pending {
		if p.kind == "node" && p.node == node {
			return true
		}
	}
	return false
}
