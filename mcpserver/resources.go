package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/store"
)

// The resources: what is open for the worker and for the leader, read
// without marking anything delivered (crew pending), as JSON. A client
// that subscribes to one gets notifications/resources/updated when its
// content changes (MCP specification, server/resources, "Subscriptions").
// Clients may ignore them: the instructions tell an agent to call
// crew_inbox at its safe points, which does not depend on them.
const (
	// InboxURI is the server's task's messages not yet acknowledged
	// (listed only for a worker's server, one started with a task).
	InboxURI = "crew://inbox"
	// PendingURI is the leader's pending list: the workers' questions
	// and reports not yet acknowledged.
	PendingURI = "crew://pending"
)

// resource is one of the server's resources: its URI, its listing and
// the app that reads it (app.App.Pending, for the app's identity).
type resource struct {
	res *mcp.Resource
	app *app.App
}

func resources(o Options) []resource {
	// The leader's view, whoever the server acts for.
	leader := app.New(o.App.Root, app.Identity{Run: o.App.Identity.Run, As: o.App.Identity.As})
	rs := []resource{{
		res: &mcp.Resource{URI: PendingURI, Name: "pending", MIMEType: "application/json",
			Title:       "The leader's pending list",
			Description: `The workers' questions (kind question: the task waits for crew_respond) and reports not yet acknowledged, most urgent first, then oldest first; {"pending":[message, ...]}. Reading marks nothing delivered.`},
		app: leader,
	}}
	if o.Task != "" {
		rs = append(rs, resource{
			res: &mcp.Resource{URI: InboxURI, Name: "inbox", MIMEType: "application/json",
				Title:       "Your messages not yet acknowledged",
				Description: `Task ` + o.Task + `'s messages from the leader not yet acknowledged (steers, follow-ups, nudges, responses, broadcasts), most urgent first; {"pending":[message, ...]}. Reading marks nothing delivered: call crew_inbox to take them.`},
			app: o.App,
		})
	}
	return rs
}

// watch holds the subscribed resources and the content each had when its
// subscribers last heard of it.
type watch struct {
	s     *mcp.Server
	byURI map[string]resource

	mu   sync.Mutex
	subs map[string]*subscription
	// resub is closed (and replaced) when a resource gains its first
	// subscriber or loses its last: Follow then watches anew.
	resub chan struct{}
}

type subscription struct {
	clients int    // subscribe requests not yet unsubscribed
	last    string // the content last read
}

func newWatch(o Options) *watch {
	w := &watch{byURI: map[string]resource{}, subs: map[string]*subscription{}, resub: make(chan struct{})}
	for _, r := range resources(o) {
		w.byURI[r.res.URI] = r
	}
	return w
}

// add registers the resources with s, which sends the notifications.
func (w *watch) add(s *mcp.Server) {
	w.s = s
	for _, r := range w.byURI {
		s.AddResource(r.res, w.read)
	}
}

// content reads a resource: the object crew_pending returns.
func (w *watch) content(ctx context.Context, r resource) (string, error) {
	p, err := pending(ctx, r.app, app.Pending{})
	if err != nil {
		return "", err
	}
	raw, err := events.Marshal(p)
	return string(bytes.TrimSpace(raw)), err
}

func (w *watch) read(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	r, ok := w.byURI[req.Params.URI]
	if !ok {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	text, err := w.content(ctx, r)
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.res.URI, MIMEType: r.res.MIMEType, Text: text}}}, nil
}

func (w *watch) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	r, ok := w.byURI[req.Params.URI]
	if !ok {
		return mcp.ResourceNotFoundError(req.Params.URI)
	}
	text, err := w.content(ctx, r)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if sub := w.subs[r.res.URI]; sub != nil {
		sub.clients++
		return nil
	}
	w.subs[r.res.URI] = &subscription{clients: 1, last: text}
	w.resubscribed()
	return nil
}

func (w *watch) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if sub := w.subs[req.Params.URI]; sub != nil {
		if sub.clients--; sub.clients <= 0 {
			delete(w.subs, req.Params.URI)
			w.resubscribed()
		}
	}
	return nil
}

// resubscribed tells Follow that the subscribed resources changed. The
// caller holds w.mu.
func (w *watch) resubscribed() {
	close(w.resub)
	w.resub = make(chan struct{})
}

// changes returns a channel closed when the subscribed resources next
// change.
func (w *watch) changes() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.resub
}

// wanted says whether Follow should watch the run for the resources
// subscribed to, and for whom (run.Run.Watch's participants): the whole
// run for crew://pending, task alone for crew://inbox, nothing else.
func (w *watch) wanted(task string) (watch bool, participants []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.subs[PendingURI] != nil:
		return true, nil
	case w.subs[InboxURI] != nil && task != "":
		return true, []string{task}
	}
	return false, nil
}

// changed re-reads every subscribed resource and notifies its
// subscribers when its content differs from what they last heard of.
func (w *watch) changed(ctx context.Context) error {
	w.mu.Lock()
	uris := make([]string, 0, len(w.subs))
	for uri := range w.subs {
		uris = append(uris, uri)
	}
	w.mu.Unlock()
	var errs []error
	for _, uri := range uris {
		text, err := w.content(ctx, w.byURI[uri])
		if err != nil {
			errs = append(errs, fmt.Errorf("read %s: %w", uri, err))
			continue
		}
		w.mu.Lock()
		sub := w.subs[uri]
		fresh := sub != nil && sub.last != text
		if fresh {
			sub.last = text
		}
		w.mu.Unlock()
		if fresh {
			if err := w.s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// DefaultRescan is how often Follow reads the subscribed resources when
// no wake-up came.
const DefaultRescan = time.Second

// Follow calls Changed each time the run's log grows with an event that
// may change a subscribed resource, so that subscribers hear of a change
// as it is committed (the store's wake-up: run.Run.Watch), and also every
// rescan besides, a safety net. What it watches follows what is
// subscribed: nothing while nothing is; the server's task alone
// (state.Concerns) while only its crew://inbox is; the whole run while
// crew://pending is, which also changes with what state.Concerns does not
// wake the leader for (its own acknowledgement of a report). The run is
// the server's (Options.App's identity), else the latest, looked for
// again every rescan (a run created since); until there is one, every
// rescan. rescan <= 0 is DefaultRescan. Failures go to report (nil:
// dropped), each once until a read succeeds or another failure comes. It
// returns when ctx ends.
func (s *Server) Follow(ctx context.Context, rescan time.Duration, report func(error)) {
	if rescan <= 0 {
		rescan = DefaultRescan
	}
	last := "" // each failure is said once, until a read succeeds or another fails
	say := func(err error) {
		text := ""
		if err != nil {
			text = err.Error()
		}
		if text != last && err != nil && ctx.Err() == nil && report != nil {
			report(err)
		}
		last = text
	}
	for ctx.Err() == nil {
		var w store.Waiter
		if watching, participants := s.watch.wanted(s.task); watching {
			if r, err := s.app.Run(""); err == nil {
				w = r.Watch(participants...) // before reading: nothing appended in between is missed
			}
		}
		say(s.Changed(ctx))
		s.follow(ctx, w, rescan, say)
		if w != nil {
			w.Close()
		}
	}
}

// follow calls Changed at each wake-up of w and every rescan, until ctx
// ends, w fails, the subscriptions change, or (when there is no w, or
// the server acts in the latest run) a rescan comes: then Follow watches
// anew.
func (s *Server) follow(ctx context.Context, w store.Waiter, rescan time.Duration, say func(error)) {
	subs := s.watch.changes()
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-subs:
			cancel()
		case <-fctx.Done():
		}
	}()
	for {
		wctx, stop := context.WithTimeout(fctx, rescan)
		var err error
		if w != nil {
			err = w.Wait(wctx)
		} else {
			<-wctx.Done()
			err = wctx.Err()
		}
		stop()
		switch {
		case fctx.Err() != nil:
			return // ctx ended, or the subscriptions changed
		case err == nil:
			say(s.Changed(ctx))
		case errors.Is(err, context.DeadlineExceeded):
			if w == nil || s.app.Identity.Run == "" {
				return
			}
			say(s.Changed(ctx))
		default:
			say(fmt.Errorf("watch the run: %w", err))
			select { // a watch that fails at once is not tried again in a loop
			case <-fctx.Done():
			case <-time.After(rescan):
			}
			return
		}
	}
}
