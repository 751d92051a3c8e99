package approvals

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"go.uber.org/zap"
)

// Notify is one notification target (approvals.notify[]).
type Notify struct {
	URL    string
	Format string // "json" (default) or "slack"
}

// Notification formats.
const (
	FormatJSON  = "json"
	FormatSlack = "slack"
)

// PendingEvent is the JSON notification of a new pending record.
type PendingEvent struct {
	Type     string `json:"type"` // "approval.pending"
	Approval Record `json:"approval"`
	// Link is the record on the admin listener (GET it, POST a decision to it).
	Link string `json:"link,omitempty"`
}

// notifyQueue bounds the notifications waiting to be sent; beyond it they are dropped
// (and logged): a slow webhook must never hold a call longer.
const notifyQueue = 256

type notifier struct {
	targets []Notify
	base    string
	log     *zap.Logger
	client  *retryablehttp.Client
	queue   chan Record
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func newNotifier(targets []Notify, base string, log *zap.Logger) *notifier {
	ctx, cancel := context.WithCancel(context.Background())
	n := &notifier{targets: targets, base: strings.TrimRight(base, "/"), log: log, ctx: ctx, cancel: cancel}
	if len(targets) == 0 {
		return n
	}
	c := retryablehttp.NewClient()
	c.RetryMax = 3
	c.RetryWaitMin, c.RetryWaitMax = 500*time.Millisecond, 5*time.Second
	c.HTTPClient.Timeout = 10 * time.Second
	c.Logger = nil
	n.client = c
	n.queue = make(chan Record, notifyQueue)
	n.wg.Add(1)
	go n.run()
	return n
}

func (n *notifier) pending(r Record) {
	if n.queue == nil {
		return
	}
	select {
	case n.queue <- r:
	default:
		n.log.Warn("approvals: notification queue full; a pending approval was not announced", zap.String("id", r.ID))
	}
}

func (n *notifier) close() {
	n.cancel()
	n.wg.Wait()
}

func (n *notifier) run() {
	defer n.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case r := <-n.queue:
			for _, t := range n.targets {
				if err := n.send(t, r); err != nil {
					n.log.Warn("approvals: notification failed", zap.String("id", r.ID), zap.String("format", t.Format), zap.Error(err))
				}
			}
		}
	}
}

// Link is the record's URL on the admin listener ("" without a base).
func (n *notifier) link(id string) string {
	if n.base == "" {
		return ""
	}
	return n.base + "/approvals/" + id
}

func (n *notifier) send(t Notify, r Record) error {
	body, err := n.payload(t.Format, r)
	if err != nil {
		return err
	}
	req, err := retryablehttp.NewRequestWithContext(n.ctx, http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.client.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("answered %d", resp.StatusCode)
	}
	return nil
}

func (n *notifier) payload(format string, r Record) ([]byte, error) {
	if format == FormatSlack {
		text := fmt.Sprintf("hookproxy: tool call *%s* on %s is waiting for approval until %s (asked by %s).",
			r.Tool.Name, r.Route, r.ExpiresAt.Format(time.RFC3339), strings.Join(r.AskedBy, ", "))
		if len(r.Reasons) > 0 {
			text += "\n" + strings.Join(r.Reasons, "\n")
		}
		if l := n.link(r.ID); l != "" {
			text += "\n<" + l + "|" + r.ID + ">"
		} else {
			text += "\n" + r.ID
		}
		return json.Marshal(map[string]string{"text": text})
	}
	return json.Marshal(PendingEvent{Type: "approval.pending", Approval: r, Link: n.link(r.ID)})
}
