package app

import (
	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/admin"
	"github.com/hookproxy/hookproxy/config"
)

// adminAuth turns admin.token / admin.tokenRef / admin.tokens into the admin handler's
// guard. The tokens are those of the configuration the process started with: like the
// admin address, a change needs a restart (a file-kept token is re-read per request).
func adminAuth(cfg *config.Config, log *zap.Logger) *admin.Auth {
	a := &admin.Auth{Logger: log}
	for _, t := range cfg.AdminAuth.NamedTokens() {
		a.Tokens = append(a.Tokens, admin.Token{Name: t.Name, Secret: t.Secret})
	}
	return a
}
