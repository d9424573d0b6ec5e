package kubectletcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/etcd-operator/etcd-operator/internal/etcd"
	"github.com/etcd-operator/etcd-operator/internal/etcd/fake"
)

// sharedFake is one fake etcd behind every client the plugin opens: the
// plugin closes each, the fake stays open.
type sharedFake struct{ *fake.Client }

func (sharedFake) Close() error { return nil }

func TestStatusLive(t *testing.T) {
	t.Parallel()
	pods, cluster := healthyCluster()
	// main-0 leads, main-1 is a voter whose status differs from the
	// stale one the operator wrote, main-3 is a learner etcd lists and
	// the status does not, main-2's port-forward fails.
	addr := func(pod string) string { return "127.0.0.1:" + fmt.Sprint(20000+int(pod[len(pod)-1]-'0')) }
	url := func(pod string) string { return "http://" + addr(pod) }
	members := []etcd.Member{
		{ID: 0x8e9e05c52164694d, Name: "main-0", ClientURLs: []string{url("main-0")}},
		{ID: 0x91bc3c398fb3c146, Name: "main-1", ClientURLs: []string{url("main-1")}},
		{ID: 0xfd422379fda50e48, Name: "main-2", ClientURLs: []string{url("main-2")}},
		{ID: 0x2b0c9a1e5d6f7a88, PeerURLs: []string{"http://main-3.main-headless.prod.svc:2380"}, IsLearner: true},
	}
	etcdFake := fake.New(members...).WithLeader(0x8e9e05c52164694d).WithClusterID(0xcdf818194e3a8c32).WithVersion("3.6.16")
	for i, pod := range []string{"main-0", "main-1"} {
		etcdFake.WithStatus(etcd.Status{
			Endpoint: url(pod), MemberID: members[i].ID, ClusterID: 0xcdf818194e3a8c32, Leader: 0x8e9e05c52164694d, Version: "3.6.16",
			DBSize: 25_000_000, DBSizeInUse: 20_000_000 + int64(i), RaftTerm: 4, RaftIndex: 200_000 + uint64(i),
		})
	}
	var forwarded []string
	live := func(o *Options) {
		o.ForwardPort = func(_ context.Context, namespace, pod string, port int) (string, func(), error) {
			forwarded = append(forwarded, fmt.Sprintf("%s/%s:%d", namespace, pod, port))
			if pod == "main-2" {
				return "", nil, errors.New(`pods "main-2" is forbidden: nope`)
			}
			return addr(pod), func() {}, nil
		}
		o.NewEtcdClient = func(cfg etcd.Config) (etcd.Client, error) {
			if cfg.TLS != nil || cfg.Username != "" || len(cfg.Endpoints) != 1 {
				return nil, fmt.Errorf("unexpected configuration %+v", cfg)
			}
			return sharedFake{etcdFake}, nil
		}
	}
	r := runCommandWith(t, append(pods, cluster.obj()), nil, 0, live, "status", "main", "--live")
	if r.err != nil {
		t.Fatalf("status --live: %v\n%s", r.err, r.errOut)
	}
	golden(t, "status/live.txt", r.out)
	if got := strings.Join(forwarded, " "); got != "prod/main-0:2379 prod/main-1:2379 prod/main-2:2379" {
		t.Errorf("port-forwards %s, want one to each running member Pod's client port", got)
	}

	etcdFake.Fail(fake.MemberList, errors.New("etcdserver: request timed out"))
	r = runCommandWith(t, append(pods, cluster.obj()), nil, 0, live, "members", "main", "--live")
	if r.err == nil || !strings.Contains(r.err.Error(), "could not read the member list of etcdcluster main from any member") {
		t.Errorf("members --live with no member list: %v", r.err)
	}
}
