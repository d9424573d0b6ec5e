package etcd

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

// countingClient is a Client that counts its Close calls.
type countingClient struct {
	Client
	closed int
}

func (c *countingClient) Close() error {
	c.closed++
	return nil
}

type poolFixture struct {
	pool    *Pool
	made    []*countingClient
	configs []Config
	clock   time.Time
}

func newPoolFixture() *poolFixture {
	f := &poolFixture{clock: time.Unix(1000, 0)}
	f.pool = NewPool(func(cfg Config) (Client, error) {
		c := &countingClient{}
		f.made = append(f.made, c)
		f.configs = append(f.configs, cfg)
		return c, nil
	}, time.Minute)
	f.pool.now = func() time.Time { return f.clock }
	return f
}

func (f *poolFixture) get(t *testing.T, owner string, cfg Config) Client {
	t.Helper()
	c, err := f.pool.Get(owner, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPoolReusesAClientAcrossPasses(t *testing.T) {
	f := newPoolFixture()
	cfg := Config{Endpoints: []string{"http://b:2379", "http://a:2379"}, Username: "root", Password: "p"}
	for range 3 {
		c := f.get(t, "uid-1", cfg)
		_ = c.Close()
		_ = c.Close() // a second Close gives nothing back twice
	}
	// The same endpoints in another order are the same set.
	_ = f.get(t, "uid-1", Config{Endpoints: []string{"http://a:2379", "http://b:2379"}, Username: "root", Password: "p"}).Close()
	if len(f.made) != 1 || f.made[0].closed != 0 {
		t.Fatalf("made %d clients, the first closed %d times; want 1 client, open", len(f.made), f.made[0].closed)
	}
	// Another cluster, or another endpoint set, has its own.
	_ = f.get(t, "uid-2", cfg).Close()
	_ = f.get(t, "uid-1", Config{Endpoints: []string{"http://a:2379"}, Username: "root", Password: "p"}).Close()
	if len(f.made) != 3 || f.pool.Len() != 3 {
		t.Fatalf("made %d clients, pool holds %d; want 3 and 3", len(f.made), f.pool.Len())
	}
}

func TestPoolReplacesAClientWhoseCredentialsChanged(t *testing.T) {
	f := newPoolFixture()
	eps := []string{"https://a:2379"}
	pemA, certA := testCA(t, "a")
	_, certB := testCA(t, "b")
	tlsOf := func(pem []byte, cert tls.Certificate) *tls.Config {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}
	}
	first := f.get(t, "uid", Config{Endpoints: eps, TLS: tlsOf(pemA, certA)})
	// A pass in flight holds the first client while the certificate is
	// renewed: the next pass gets a new client, the first stays open for
	// the pass that holds it.
	second := f.get(t, "uid", Config{Endpoints: eps, TLS: tlsOf(pemA, certB)})
	if len(f.made) != 2 || f.made[0].closed != 0 {
		t.Fatalf("made %d clients, the first closed %d times; want 2, the first open while held", len(f.made), f.made[0].closed)
	}
	_ = first.Close()
	if f.made[0].closed != 1 {
		t.Fatalf("the replaced client closed %d times after its last caller let go; want 1", f.made[0].closed)
	}
	_ = second.Close()
	// The same CA parsed again and the same certificate are the same
	// credentials.
	_ = f.get(t, "uid", Config{Endpoints: eps, TLS: tlsOf(pemA, certB)}).Close()
	// A new password is not.
	_ = f.get(t, "uid", Config{Endpoints: eps, TLS: tlsOf(pemA, certB), Username: "root", Password: "new"}).Close()
	if len(f.made) != 3 || f.made[1].closed != 1 || f.made[2].closed != 0 {
		t.Fatalf("made %d clients, closed %d and %d; want 3, the second closed once, the third open", len(f.made), f.made[1].closed, f.made[2].closed)
	}
}

func TestPoolClosesIdleClients(t *testing.T) {
	f := newPoolFixture()
	held := f.get(t, "held", Config{Endpoints: []string{"http://h:2379"}})
	_ = f.get(t, "gone", Config{Endpoints: []string{"http://g:2379"}}).Close()
	f.clock = f.clock.Add(2 * time.Minute)
	_ = f.get(t, "other", Config{Endpoints: []string{"http://o:2379"}}).Close()
	if f.made[1].closed != 1 {
		t.Errorf("a client unused for 2m (idle 1m) closed %d times; want 1", f.made[1].closed)
	}
	if f.made[0].closed != 0 {
		t.Error("a client a caller still holds was closed")
	}
	_ = held.Close()
	if f.pool.Len() != 2 {
		t.Errorf("pool holds %d clients; want 2 (held, other)", f.pool.Len())
	}
}

// testCA returns a self-signed certificate's PEM and the certificate with
// its key, named cn.
func testCA(t *testing.T, cn string) ([]byte, tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	pair, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, pair
}
