package state

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/internal/redistest"
)

// TestRedisPassword: a server with requirepass refuses a store without the password and
// serves one with it (the password comes from the environment in the configuration).
func TestRedisPassword(t *testing.T) {
	srv := redistest.StartWith(t, "--requirepass", "s3cret-pw")
	ctx := context.Background()
	without, err := NewRedis(RedisOptions{URL: srv.URL(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer without.Close()
	if _, err := without.Load(ctx, Scope{Session: "s"}, nil, NextCall); err == nil {
		t.Fatal("a store without the password was served")
	}
	with, err := NewRedis(RedisOptions{URL: srv.URL(), Password: "s3cret-pw", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer with.Close()
	if _, err := with.Load(ctx, Scope{Session: "s"}, nil, NextCall); err != nil {
		t.Fatalf("with the password: %v", err)
	}
}

// TestRedisTLS: rediss:// with the CA that signed the server's certificate works; without
// that CA (system roots only) the handshake is refused.
func TestRedisTLS(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile := writeTestPKI(t, dir)
	srv := redistest.StartWith(t, "--tls-port", "{port}", "--tls-cert-file", certFile, "--tls-key-file", keyFile,
		"--tls-ca-cert-file", caFile, "--tls-auth-clients", "no")
	url := "rediss://" + srv.Addr + "/0"
	ctx := context.Background()
	good, err := NewRedis(RedisOptions{URL: url, Timeout: 2 * time.Second, TLS: RedisTLS{CAFile: caFile, ServerName: "redis.test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	if err := good.Record(ctx, Scope{Session: "s"}, []Record{{ID: "m", Count: 1, Fingerprint: "f", Unchanged: true}}); err != nil {
		t.Fatalf("over TLS with the CA: %v", err)
	}
	bad, err := NewRedis(RedisOptions{URL: url, Timeout: 2 * time.Second, TLS: RedisTLS{ServerName: "redis.test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if _, err := bad.Load(ctx, Scope{Session: "s"}, []string{"m"}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without the CA: %v", err)
	}
	if _, err := NewRedis(RedisOptions{URL: url, TLS: RedisTLS{CAFile: keyFile}}); err == nil {
		t.Fatal("a CA file without a certificate was accepted")
	}
}

// writeTestPKI writes a CA and a server certificate for redis.test and 127.0.0.1.
func writeTestPKI(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hookproxy test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "redis.test"},
		DNSNames: []string{"redis.test"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	caCert, _ := x509.ParseCertificate(caDER)
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", leafDER), write("server.key", "EC PRIVATE KEY", keyDER)
}
