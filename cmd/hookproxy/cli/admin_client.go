package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/hookproxy/hookproxy/config"
)

// Environment of the admin listener's clients (`hookproxy approvals`, `hookproxy pins`).
const (
	EnvAdmin      = "HOOKPROXY_ADMIN"       // the admin listener's address or URL
	EnvAdminToken = "HOOKPROXY_ADMIN_TOKEN" // its bearer token (admin.token)
)

// adminUsage is the flags every admin client takes, for the usage texts.
const adminUsage = `admin listener: --admin ADDR, else $` + EnvAdmin + `, else the configuration's admin, else 127.0.0.1:9090
admin token:    --token-file PATH, else $` + EnvAdminToken + ` (--token-env NAME for another variable),
                else the configuration's first admin token; never a flag value (it would show in ps)
configuration:  --config FILE, else $` + config.EnvConfig + `
`

// parseInterspersed parses flags that may stand before, between or after the positional
// arguments (approve ID --reason TEXT) and returns the positional ones. A parse error (its
// message already written) gives exit code 2, -help 0.
func parseInterspersed(flags *flag.FlagSet, args []string) (pos []string, code int, ok bool) {
	for {
		if err := flags.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, 0, false
			}
			return nil, 2, false
		}
		if flags.NArg() == 0 {
			return pos, 0, true
		}
		pos = append(pos, flags.Arg(0))
		args = flags.Args()[1:]
	}
}

// adminFlags are the flags that say where the admin listener is and which token to send.
type adminFlags struct {
	addr, config, tokenEnv, tokenFile *string
}

func registerAdminFlags(fs *flag.FlagSet) adminFlags {
	return adminFlags{
		addr:      fs.String("admin", "", "admin listener address host:port or URL"),
		config:    fs.String("config", "", "configuration file naming the admin address and token (default: $"+config.EnvConfig+")"),
		tokenEnv:  fs.String("token-env", EnvAdminToken, "environment variable holding the admin token"),
		tokenFile: fs.String("token-file", "", "file holding the admin token"),
	}
}

// client resolves the flags into a client of the admin listener. The configuration file is
// read only when the address or the token is not given otherwise.
func (f adminFlags) client(timeout time.Duration) (*adminClient, error) {
	addr, token := *f.addr, ""
	if addr == "" {
		addr = os.Getenv(EnvAdmin)
	}
	switch {
	case *f.tokenFile != "":
		b, err := os.ReadFile(*f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	case *f.tokenEnv != "":
		token = os.Getenv(*f.tokenEnv)
	}
	if path := config.PathFromEnv(*f.config); path != "" && (addr == "" || token == "") {
		cfg, err := config.Load(path)
		if err != nil {
			return nil, err
		}
		if addr == "" {
			addr = cfg.Admin
		}
		if toks := cfg.AdminAuth.NamedTokens(); token == "" && len(toks) > 0 {
			if token, err = toks[0].Secret(); err != nil {
				return nil, fmt.Errorf("the admin token: %w", err)
			}
		}
	}
	base, err := adminBase(addr)
	if err != nil {
		return nil, err
	}
	return &adminClient{base: base, token: token, http: &http.Client{Timeout: timeout}}, nil
}

// adminBase is the base URL of an admin address: host:port (":port" is loopback's), or a
// URL; "" is the default 127.0.0.1:9090.
func adminBase(addr string) (string, error) {
	given := addr
	if addr == "" {
		addr = "127.0.0.1:9090"
	}
	if !strings.Contains(addr, "://") {
		if strings.HasPrefix(addr, ":") {
			addr = "127.0.0.1" + addr
		}
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("the admin address %q is not host:port or a URL", given)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// adminClient sends JSON requests to the admin listener with its bearer token.
type adminClient struct {
	base, token string
	http        *http.Client
}

// do sends one request (body, when not nil, as JSON) and decodes a 200 answer into out;
// any other status is an error carrying the status and the server's message.
func (c *adminClient) do(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("the admin listener at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(raw))
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, msg)
	}
	return json.Unmarshal(raw, out)
}
