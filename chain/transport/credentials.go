package transport

// Endpoint credentials of HTTP backends (AHP-AUTH-001): explicit
// bearer (tokenEnv, tokenRef) and oauth client credentials. Everything is resolved at
// delivery, inside the subscription deadline; a binding that cannot be resolved is a
// KindCredentials failure and the request is never sent unauthenticated or with another
// binding. No secret value ever appears in an error, a log line or a record.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/hookproxy/hookproxy/chain/registration"
)

const (
	// maxSecretFileBytes bounds a secret file: a token, not a document.
	maxSecretFileBytes = 64 << 10
	// maxMetadataBytes bounds an authorization server metadata document (the TS SDK's
	// limit); the token response is bounded by the oauth2 package (1 MiB).
	maxMetadataBytes = 1 << 20
)

// credentials resolves the Authorization header of one backend.
type credentials struct {
	auth  *registration.Authentication
	oauth *oauthClient
}

func newCredentials(a *registration.Authentication, opts Options) *credentials {
	c := &credentials{auth: a}
	if a != nil && a.Type == "oauth" {
		rt := cleanhttp.DefaultTransport()
		if opts.RootCAs != nil {
			rt.TLSClientConfig = &tls.Config{RootCAs: opts.RootCAs, MinVersion: tls.VersionTLS12}
		}
		c.oauth = &oauthClient{
			auth: a,
			http: &http.Client{
				Transport: rt,
				// The client secret and the issued token never travel to another
				// location: a redirect from the issuer is a failure, not a hop.
				CheckRedirect: func(*http.Request, []*http.Request) error {
					return errors.New("redirects are not followed for credential requests")
				},
			},
			sem: make(chan struct{}, 1),
		}
	}
	return c
}

// authorization returns the Authorization header value ("" without a binding); cached
// reports that it carries an OAuth token acquired for an earlier delivery.
func (c *credentials) authorization(ctx context.Context) (header string, cached bool, err error) {
	if c == nil || c.auth == nil {
		return "", false, nil
	}
	a := c.auth
	switch a.Type {
	case "bearer":
		var token string
		switch {
		case a.TokenEnv != "":
			token = os.Getenv(a.TokenEnv)
			if token == "" {
				return "", false, fail(KindCredentials, "bearer token variable %s is unset or empty", a.TokenEnv)
			}
		case a.TokenRef != "":
			if token, err = resolveSecret(a.TokenRef); err != nil {
				return "", false, fail(KindCredentials, "bearer tokenRef: %v", err)
			}
		default:
			return "", false, fail(KindCredentials, "bearer authentication names no token source")
		}
		if !validBearerToken(token) {
			// Never echo the value: say only which reference is wrong.
			return "", false, fail(KindCredentials, "bearer token from %s holds characters not allowed in a header", a.TokenEnv+a.TokenRef)
		}
		return "Bearer " + token, false, nil
	case "oauth":
		token, cached, err := c.oauth.token(ctx)
		if err != nil {
			return "", false, err
		}
		return "Bearer " + token, cached, nil
	default:
		return "", false, fail(KindCredentials, "unsupported authentication type %q", a.Type)
	}
}

// rejected is called when the backend answered 401: a cached oauth token is dropped so
// the next delivery acquires a fresh one (a rotated or revoked token). A bearer secret
// is re-read at every delivery anyway, and a 401 never selects another secret.
func (c *credentials) rejected(ctx context.Context) {
	if c != nil && c.oauth != nil {
		c.oauth.drop(ctx)
	}
}

// resolveSecret reads a tokenRef or clientSecretRef. A file is read at every call, so a
// rotated mounted secret takes effect at the next delivery.
func resolveSecret(raw string) (string, error) {
	ref, err := registration.ParseSecretRef(raw)
	if err != nil {
		return "", err
	}
	switch ref.Scheme {
	case registration.SecretRefEnv:
		v := os.Getenv(ref.Target)
		if v == "" {
			return "", fmt.Errorf("%s is unset or empty", ref)
		}
		return v, nil
	case registration.SecretRefFile:
		f, err := os.Open(ref.Target)
		if err != nil {
			return "", fmt.Errorf("%s cannot be read: %v", ref, pathCause(err))
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxSecretFileBytes+1))
		if err != nil {
			return "", fmt.Errorf("%s cannot be read: %v", ref, pathCause(err))
		}
		if len(b) > maxSecretFileBytes {
			return "", fmt.Errorf("%s is larger than %d bytes", ref, maxSecretFileBytes)
		}
		// Mounted secrets usually end with a newline; surrounding white space is never
		// part of a token.
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", fmt.Errorf("%s is empty", ref)
		}
		return v, nil
	}
	return "", fmt.Errorf("%s: unsupported reference", ref)
}

func pathCause(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// oauthClient obtains and caches the access token of one oauth binding. The cache is
// bound to this binding (issuer, resource, client, scopes) by construction: one client per
// backend registration.
type oauthClient struct {
	auth *registration.Authentication
	http *http.Client
	sem  chan struct{} // one acquisition at a time; waiters give up with their deadline

	tokenURL string        // discovered once from the issuer's metadata
	tok      *oauth2.Token // cached until it expires
}

func (o *oauthClient) lock(ctx context.Context) error {
	select {
	case o.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctxFailure(ctx, "waiting for an oauth token")
	}
}

func (o *oauthClient) unlock() { <-o.sem }

// drop forgets the cached token. It waits for a concurrent acquisition no longer than
// ctx allows; if that ends first the token stays, and the next 401 drops it.
func (o *oauthClient) drop(ctx context.Context) {
	if o.lock(ctx) != nil {
		return
	}
	o.tok = nil
	o.unlock()
}

// token returns a valid access token, acquiring one with the client-credentials grant
// when the cached one is missing or expired (oauth2.Token.Valid keeps a safety margin).
func (o *oauthClient) token(ctx context.Context) (token string, cached bool, err error) {
	if err := o.lock(ctx); err != nil {
		return "", false, err
	}
	defer o.unlock()
	if o.tok.Valid() {
		return o.tok.AccessToken, true, nil
	}
	token, err = o.acquire(ctx)
	return token, false, err
}

// acquire runs the client-credentials grant; the caller holds the lock.
func (o *oauthClient) acquire(ctx context.Context) (string, error) {
	a := o.auth
	if a.Flow != "client_credentials" {
		return "", fail(KindCredentials, "oauth flow %q cannot run unattended; hookproxy supports client_credentials", a.Flow)
	}
	if a.ClientSecretRef == "" {
		return "", fail(KindCredentials, "oauth client_credentials needs clientSecretRef")
	}
	secret, err := resolveSecret(a.ClientSecretRef)
	if err != nil {
		return "", fail(KindCredentials, "oauth clientSecretRef: %v", err)
	}
	if o.tokenURL == "" {
		if o.tokenURL, err = o.discover(ctx); err != nil {
			return "", err
		}
	}
	cfg := clientcredentials.Config{
		ClientID:     a.ClientID,
		ClientSecret: secret,
		TokenURL:     o.tokenURL,
		Scopes:       a.Scopes,
		// RFC 8707: ask for a token bound to the backend's protected resource; "audience"
		// is the same request in the vocabulary of issuers that predate RFC 8707.
		EndpointParams: url.Values{"resource": {a.Resource}, "audience": {a.Resource}},
	}
	tok, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, o.http))
	if err != nil {
		if ctx.Err() != nil {
			return "", ctxFailure(ctx, "acquiring an oauth token")
		}
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil {
			// Only the status: the issuer's error body is not for logs.
			return "", fail(KindCredentials, "token endpoint answered HTTP %d", re.Response.StatusCode)
		}
		return "", fail(KindCredentials, "token request failed: %v", netCause(err))
	}
	if !strings.EqualFold(tok.Type(), "Bearer") || !validBearerToken(tok.AccessToken) {
		return "", fail(KindCredentials, "token endpoint issued a token that is not a usable bearer token")
	}
	o.tok = tok
	return tok.AccessToken, nil
}

// discover finds the token endpoint in the issuer's authorization server metadata:
// RFC 8414 first (the well-known segment inserted before the issuer's path), then OpenID
// Connect discovery. The metadata must name the configured issuer exactly, and the token
// endpoint must be https.
func (o *oauthClient) discover(ctx context.Context) (string, error) {
	iss, err := url.Parse(o.auth.Issuer)
	if err != nil || iss.Scheme != "https" || iss.Host == "" {
		return "", fail(KindCredentials, "oauth issuer must be an https URL")
	}
	path := strings.TrimSuffix(iss.Path, "/")
	candidates := []string{
		(&url.URL{Scheme: iss.Scheme, Host: iss.Host, Path: "/.well-known/oauth-authorization-server" + path}).String(),
		(&url.URL{Scheme: iss.Scheme, Host: iss.Host, Path: path + "/.well-known/openid-configuration"}).String(),
	}
	var last error
	for _, u := range candidates {
		md, err := o.metadata(ctx, u)
		if err != nil {
			if ctx.Err() != nil {
				return "", ctxFailure(ctx, "discovering the oauth token endpoint")
			}
			last = err
			continue
		}
		if md.Issuer != o.auth.Issuer && md.Issuer != strings.TrimSuffix(o.auth.Issuer, "/") {
			return "", fail(KindCredentials, "issuer metadata names another issuer")
		}
		if len(md.GrantTypes) > 0 && !slices.Contains(md.GrantTypes, "client_credentials") {
			return "", fail(KindCredentials, "the issuer does not support the client_credentials grant")
		}
		tu, err := url.Parse(md.TokenEndpoint)
		if err != nil || tu.Scheme != "https" || tu.Host == "" {
			return "", fail(KindCredentials, "issuer metadata has no https token_endpoint")
		}
		return md.TokenEndpoint, nil
	}
	return "", fail(KindCredentials, "oauth issuer metadata not found: %v", last)
}

type authServerMetadata struct {
	Issuer        string   `json:"issuer"`
	TokenEndpoint string   `json:"token_endpoint"`
	GrantTypes    []string `json:"grant_types_supported"`
}

func (o *oauthClient) metadata(ctx context.Context, u string) (*authServerMetadata, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second) // the deadline usually ends it sooner
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := o.http.Do(req)
	if err != nil {
		return nil, netCause(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d from %s", resp.StatusCode, u)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes+1))
	if err != nil {
		return nil, netCause(err)
	}
	if len(b) > maxMetadataBytes {
		return nil, fmt.Errorf("metadata larger than %d bytes", maxMetadataBytes)
	}
	var md authServerMetadata
	if err := json.Unmarshal(b, &md); err != nil {
		return nil, fmt.Errorf("metadata is not a JSON object")
	}
	return &md, nil
}
