package config

import (
	"fmt"
	"net/url"
	"time"
)

// Approvals configures the holding of tool calls that a policy asks a person about
// (permission ask at tool.before). Approvals exist whenever the admin listener is on:
// it is where people decide.
type Approvals struct {
	// Timeout is how long a held call waits for a decision before it expires (denied):
	// default 120s, at most 10m.
	Timeout time.Duration    `yaml:"timeout" json:"timeout"`
	Notify  []ApprovalNotify `yaml:"notify" json:"notify"`
	// PublicURL is the admin listener's URL as people reach it, for the link a
	// notification carries (default: http:// and the admin address).
	PublicURL string `yaml:"publicURL" json:"publicURL"`
}

// ApprovalNotify is one webhook told of every new pending approval.
type ApprovalNotify struct {
	URL    string `yaml:"url" json:"url"`
	Format string `yaml:"format" json:"format"` // json (default) | slack
}

// Bounds of approvals.timeout.
const (
	DefaultApprovalTimeout = 120 * time.Second
	MaxApprovalTimeout     = 10 * time.Minute
)

func applyApprovalDefaults(c *Config) {
	if c.Approvals.Timeout == 0 {
		c.Approvals.Timeout = DefaultApprovalTimeout
	}
	for i := range c.Approvals.Notify {
		if c.Approvals.Notify[i].Format == "" {
			c.Approvals.Notify[i].Format = "json"
		}
	}
}

func validateApprovals(c *Config, add func(path, format string, args ...any)) {
	a := c.Approvals
	if a.Timeout <= 0 || a.Timeout > MaxApprovalTimeout {
		add("approvals.timeout", "%s must be above 0 and at most %s", a.Timeout, MaxApprovalTimeout)
	}
	for i, n := range a.Notify {
		path := fmt.Sprintf("approvals.notify[%d]", i)
		if u, err := url.Parse(n.URL); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			add(path+".url", "%q must be an absolute http:// or https:// URL", n.URL)
		}
		if n.Format != "json" && n.Format != "slack" {
			add(path+".format", "%q is not json or slack", n.Format)
		}
	}
	if a.PublicURL != "" {
		if u, err := url.Parse(a.PublicURL); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			add("approvals.publicURL", "%q must be an absolute http:// or https:// URL", a.PublicURL)
		}
	}
}

// ApprovalLinkBase is the base of the links notifications carry.
func (c *Config) ApprovalLinkBase() string {
	if c.Approvals.PublicURL != "" {
		return c.Approvals.PublicURL
	}
	if c.Admin == "" {
		return ""
	}
	return "http://" + c.Admin
}
