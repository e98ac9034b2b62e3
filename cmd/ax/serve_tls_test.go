package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/admin"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key, as PEM, to
// files in dir, and returns their paths and a pool that trusts the certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "ax serve test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for path, block := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "PRIVATE KEY", Bytes: pkcs8}} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// get GETs url with client and the bearer token (none when empty).
func get(client *http.Client, url, token string) (int, error) {
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// With --tls-cert and --tls-key, ax serve serves HTTPS with them: a client that
// trusts the certificate is served, one that does not fails its handshake.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	url, logs := startServeLogs(t, "--dsn", filepath.Join(dir, "ax.db"), "--tokens", "dash:viewer:"+admin.HashToken("dash-secret"),
		"--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(url, "https://127.0.0.1:") {
		t.Fatalf("ax serve listens on %s, want https://127.0.0.1:…", url)
	}
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer transport.CloseIdleConnections()
	trusting := &http.Client{Transport: transport}
	for path, want := range map[string]int{"/health": 200, "/tasks": 200, "/metrics": 200} {
		if code, err := get(trusting, url+path, "dash-secret"); err != nil || code != want {
			t.Errorf("GET %s over TLS: %d, %v; want %d", path, code, err, want)
		}
	}
	untrusting := &http.Transport{}
	defer untrusting.CloseIdleConnections()
	var unknown x509.UnknownAuthorityError
	if _, err := get(&http.Client{Transport: untrusting}, url+"/health", ""); !errors.As(err, &unknown) {
		t.Errorf("GET /health by a client that does not trust the certificate: %v, want an unknown authority", err)
	}
	if strings.Contains(logs.String(), "without TLS") {
		t.Errorf("ax serve with TLS warned about its absence:\n%s", logs)
	}
}

// --tls-cert and --tls-key go together; files that hold no certificate or key fail.
func TestServeTLSFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile, _ := selfSigned(t, dir)
	db := filepath.Join(dir, "ax.db")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--tls-cert", certFile}, exitUsage, "--tls-cert and --tls-key go together: give both, or neither"},
		{[]string{"--tls-key", keyFile}, exitUsage, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-cert", keyFile, "--tls-key", certFile}, exitFail, "ax serve: --tls-cert, --tls-key: tls:"},
		{[]string{"--tls-cert", filepath.Join(dir, "none.pem"), "--tls-key", keyFile}, exitFail, "no such file"},
	} {
		code, _, stderr := runAx(t, append([]string{"serve", "--dsn", db, "--listen", "127.0.0.1:0"}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("ax serve %s: exit %d, stderr %q; want %d with %q", strings.Join(c.args, " "), code, stderr, c.code, c.want)
		}
	}
}

// ax serve warns, once, when it listens beyond loopback without TLS.
func TestServeWarnsBeyondLoopbackWithoutTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile, _ := selfSigned(t, dir)
	tokens := "dash:viewer:" + admin.HashToken("dash-secret")
	for _, c := range []struct {
		args []string
		warn bool
	}{
		{[]string{"--listen", "0.0.0.0:0"}, true},
		{[]string{"--listen", "127.0.0.1:0"}, false},
		{[]string{"--listen", "0.0.0.0:0", "--tls-cert", certFile, "--tls-key", keyFile}, false},
	} {
		_, logs := startServeLogs(t, append([]string{"--dsn", filepath.Join(dir, "ax.db"), "--tokens", tokens}, c.args...)...)
		n := strings.Count(logs.String(), "level=WARN msg=\"ax serve: listening beyond loopback without TLS")
		if want := map[bool]int{true: 1, false: 0}[c.warn]; n != want {
			t.Errorf("ax serve %s: %d warnings about no TLS, want %d\n%s", strings.Join(c.args, " "), n, want, logs)
		}
	}
}

// Every phase of a request to ax serve is bounded in time.
func TestServeServerTimeouts(t *testing.T) {
	t.Parallel()
	srv := newServer(http.NotFoundHandler(), nil, slog.New(slog.DiscardHandler))
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 || srv.MaxHeaderBytes <= 0 {
		t.Errorf("ax serve's server: read header %v, read %v, write %v, idle %v, max header bytes %d; want each set",
			srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
}

// A malformed --tokens entry is named by its position (and actor), never echoed: it
// may be a secret pasted by mistake.
func TestServeTokensAreNotEchoed(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "ax.db")
	for tokens, want := range map[string]string{
		"ops:operator:" + admin.HashToken("x") + ",pasted-s3cret-token": "ax serve: --tokens: ax: admin: token entry 2: not actor:role:sha256:<64 hex digits>",
		"ops:operator:pasted-s3cret-token":                              `ax serve: --tokens: ax: admin: token entry 1 (actor "ops"): the hash is not`,
	} {
		code, _, stderr := runAx(t, "serve", "--dsn", db, "--listen", "127.0.0.1:0", "--tokens", tokens)
		if code != exitUsage || !strings.Contains(stderr, want) || strings.Contains(stderr, "pasted-s3cret-token") {
			t.Errorf("ax serve --tokens %q: exit %d, stderr %q; want %d with %q, without the entry", tokens, code, stderr, exitUsage, want)
		}
	}
}

// TestServerErrorsRateLimited: the server's own error lines — a port scan's failed TLS
// handshakes — are logged at most once a minute per client address, and the next line
// counts those not logged.
func TestServerErrorsRateLimited(t *testing.T) {
	t.Parallel()
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, nil))
	w := newServer(http.NotFoundHandler(), nil, log).ErrorLog
	for i := range 100 {
		w.Printf("http: TLS handshake error from 192.0.2.1:%d: EOF", 1000+i)
	}
	w.Printf("http: TLS handshake error from 192.0.2.2:1000: EOF")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "192.0.2.1") || !strings.Contains(lines[1], "192.0.2.2") || !strings.Contains(lines[1], "lines_not_logged=99") {
		t.Fatalf("101 handshake errors from two addresses logged:\n%s\nwant one line each, the second counting the 99 not logged", buf.String())
	}
}
