package etcd

import (
	"bytes"
	"crypto/tls"
	"slices"
	"strings"
	"sync"
	"time"
)

// Pool keeps the clients it makes between reconcile passes: one per owner
// (a cluster's UID), endpoint set and credentials. A cluster probed every
// few seconds is then not dialled again on every pass, and with
// authentication on not authenticated again either (each authentication is
// a raft proposal and a bcrypt check on a member).
//
// A client is replaced when the credentials of the same owner and
// endpoints change (a renewed certificate, a new root password): the old
// one is closed once the last caller using it closes it. A client no caller
// has used for the idle period is closed by a later Get, so clients of
// deleted clusters and of endpoint sets that no longer exist go away.
type Pool struct {
	connect func(Config) (Client, error)
	idle    time.Duration
	now     func() time.Time

	mu      sync.Mutex
	entries map[poolKey]*pooled
}

type poolKey struct{ owner, endpoints string }

type pooled struct {
	client   Client
	cfg      Config
	refs     int
	lastUsed time.Time
	// replaced is set when a newer client took this one's key; it is
	// closed when refs drops to zero.
	replaced bool
}

// NewPool returns a Pool that makes clients with connect (New, or a fake
// in tests) and closes those unused for idle.
func NewPool(connect func(Config) (Client, error), idle time.Duration) *Pool {
	return &Pool{connect: connect, idle: idle, now: time.Now, entries: map[poolKey]*pooled{}}
}

// Get returns a client for cfg on behalf of owner. The caller closes it as
// any Client; the connection stays in the pool for the next Get.
func (p *Pool) Get(owner string, cfg Config) (Client, error) {
	key := poolKey{owner: owner, endpoints: strings.Join(slices.Sorted(slices.Values(cfg.Endpoints)), ",")}
	p.mu.Lock()
	p.closeIdle()
	if e := p.entries[key]; e != nil && sameCredentials(e.cfg, cfg) {
		e.refs++
		p.mu.Unlock()
		return &lease{pool: p, entry: e, Client: e.client}, nil
	}
	p.mu.Unlock()

	// Connecting can take a dial timeout (authentication): not under the
	// lock, so other clusters' passes go on meanwhile.
	c, err := p.connect(cfg)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.entries[key]; e != nil && sameCredentials(e.cfg, cfg) {
		// Another pass connected meanwhile: use its client.
		_ = c.Close()
		e.refs++
		return &lease{pool: p, entry: e, Client: e.client}, nil
	}
	if old := p.entries[key]; old != nil {
		p.retire(key, old)
	}
	e := &pooled{client: c, cfg: cfg, refs: 1, lastUsed: p.now()}
	p.entries[key] = e
	return &lease{pool: p, entry: e, Client: c}, nil
}

// Len is the number of clients the pool holds.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.entries)
}

// closeIdle closes the clients no caller holds that were last used longer
// than the idle period ago. p.mu is held.
func (p *Pool) closeIdle() {
	now := p.now()
	for key, e := range p.entries {
		if e.refs == 0 && now.Sub(e.lastUsed) > p.idle {
			p.retire(key, e)
		}
	}
}

// retire takes e out of the pool and closes it, or leaves that to the
// last of its callers. p.mu is held.
func (p *Pool) retire(key poolKey, e *pooled) {
	delete(p.entries, key)
	e.replaced = true
	if e.refs == 0 {
		_ = e.client.Close()
	}
}

func (p *Pool) release(e *pooled) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e.refs--
	e.lastUsed = p.now()
	if e.replaced && e.refs == 0 {
		_ = e.client.Close()
	}
}

// lease is a pooled client handed to one caller: its Close gives the
// client back to the pool, once.
type lease struct {
	Client
	pool  *Pool
	entry *pooled
	once  sync.Once
}

func (l *lease) Close() error {
	l.once.Do(func() { l.pool.release(l.entry) })
	return nil
}

// sameCredentials says whether a and b authenticate the same way to the
// same servers: the same user and password, and the same trusted CAs and
// client certificate.
func sameCredentials(a, b Config) bool {
	if a.Username != b.Username || a.Password != b.Password {
		return false
	}
	if (a.TLS == nil) != (b.TLS == nil) {
		return false
	}
	if a.TLS == nil {
		return true
	}
	if a.TLS.ServerName != b.TLS.ServerName || !sameCertificates(a.TLS.Certificates, b.TLS.Certificates) {
		return false
	}
	if a.TLS.RootCAs == nil || b.TLS.RootCAs == nil {
		return a.TLS.RootCAs == b.TLS.RootCAs
	}
	return a.TLS.RootCAs.Equal(b.TLS.RootCAs)
}

func sameCertificates(a, b []tls.Certificate) bool {
	return slices.EqualFunc(a, b, func(x, y tls.Certificate) bool {
		return slices.EqualFunc(x.Certificate, y.Certificate, bytes.Equal)
	})
}
