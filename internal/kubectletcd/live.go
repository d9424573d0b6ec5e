package kubectletcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
	"github.com/etcd-operator/etcd-operator/internal/memberclient"
)

// PortForwarder forwards a local address to a port of a Pod, through the
// API server as kubectl port-forward does; stop ends it.
type PortForwarder func(ctx context.Context, namespace, pod string, port int) (addr string, stop func(), err error)

// memberReport is what one member said about itself when asked live.
type memberReport struct {
	status etcd.Status
	err    error
}

// liveMembers is the members table from etcd itself: every member of
// etcd's member list, with its role as the members see it, what it
// reported of itself (or why it could not be asked: reports is keyed by
// member name) and its Pod.
func liveMembers(list []etcd.Member, reports map[string]memberReport, pods []corev1.Pod) []MemberView {
	var leader uint64
	for _, r := range reports {
		if r.err == nil && r.status.Leader != 0 {
			leader = r.status.Leader
			break
		}
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		byName[pods[i].Name] = &pods[i]
	}
	out := make([]MemberView, 0, len(list))
	for _, m := range list {
		mv := MemberView{Name: memberName(m), ID: etcd.FormatID(m.ID), Role: roleVoter}
		switch {
		case m.IsLearner:
			mv.Role = roleLearner
		case m.ID == leader:
			mv.Role = roleLeader
		}
		if r, ok := reports[mv.Name]; ok {
			healthy := r.err == nil
			mv.Healthy = &healthy
			if r.err != nil {
				mv.LastError = r.err.Error()
			} else {
				s := r.status
				mv.DBSize, mv.DBSizeInUse = s.DBSize, s.DBSizeInUse
				mv.RaftTerm, mv.RaftIndex, mv.Version, mv.Alarms = s.RaftTerm, s.RaftIndex, s.Version, s.Errors
			}
		}
		mv.Pod = podMissing
		if p := byName[mv.Name]; p != nil {
			setPod(&mv, p)
			delete(byName, mv.Name)
		}
		out = append(out, mv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return appendPodsOnly(out, byName)
}

// memberName is a member's name, or for a member that has not started
// yet (etcd knows only its peer URL) the Pod name its peer URL starts
// with.
func memberName(m etcd.Member) string {
	if m.Name != "" || len(m.PeerURLs) == 0 {
		return m.Name
	}
	u, err := url.Parse(m.PeerURLs[0])
	if err != nil {
		return ""
	}
	host, _, _ := strings.Cut(u.Hostname(), ".")
	return host
}

// liveView replaces the members of v with what the members of c say now,
// each asked through a port-forward to its Pod's client port with the
// cluster's own client credentials (the CA, the operator's client
// certificate, root's password: the user must be allowed to read those
// Secrets and to port-forward to Pods).
func (s *session) liveView(ctx context.Context, c *etcdv1alpha1.EtcdCluster, pods []corev1.Pod, v StatusView) (StatusView, error) {
	base, err := memberclient.Config(ctx, s.client, c, nil)
	if err != nil {
		return v, fmt.Errorf("reading the client credentials of etcdcluster %s: %w (status without --live needs none)", c.Name, err)
	}
	reports := map[string]memberReport{}
	var list []etcd.Member
	var clusterID uint64
	var listErr error
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		r, members, id, err := s.askMember(ctx, c, p.Name, base)
		reports[p.Name] = r
		switch {
		case err != nil:
			listErr = err
		case list == nil:
			list, clusterID = members, id
		}
	}
	if list == nil {
		if listErr == nil {
			listErr = errors.New("no member Pod is running")
		}
		return v, fmt.Errorf("could not read the member list of etcdcluster %s from any member: %w", c.Name, listErr)
	}
	v.Live = true
	v.ClusterID = etcd.FormatID(clusterID)
	v.Members = liveMembers(list, reports, pods)
	return v, nil
}

// askMember asks the member of Pod pod for its status and health and the
// member list, through a port-forward.
func (s *session) askMember(ctx context.Context, c *etcdv1alpha1.EtcdCluster, pod string, base etcd.Config) (memberReport, []etcd.Member, uint64, error) {
	addr, stop, err := s.ForwardPort(ctx, s.namespace, pod, builder.ClientPort)
	if err != nil {
		err = fmt.Errorf("port-forward to %s: %w", pod, err)
		return memberReport{err: err}, nil, 0, err
	}
	defer stop()
	cfg := base
	scheme := "http"
	if cfg.TLS != nil {
		// The member's certificate names it, not the forwarded address.
		cfg.TLS = cfg.TLS.Clone()
		cfg.TLS.ServerName = builder.MemberHost(c, pod)
		scheme = "https"
	}
	endpoint := scheme + "://" + addr
	cfg.Endpoints = []string{endpoint}
	// The connection goes through the API server and the node: under
	// load it takes more than the operator's 1 s between Pods, and a
	// member reported as not answering for that would be a false alarm.
	cfg.ConnectWait = cfg.CallTimeout
	cli, err := s.NewEtcdClient(cfg)
	if err != nil {
		return memberReport{err: err}, nil, 0, err
	}
	defer func() { _ = cli.Close() }()
	status, err := cli.Status(ctx, endpoint)
	if err == nil {
		err = cli.Health(ctx, endpoint)
	}
	if err != nil {
		return memberReport{err: err}, nil, 0, err
	}
	id, members, err := cli.MemberList(ctx)
	return memberReport{status: status}, members, id, err
}

// forwardPort is the PortForwarder of a REST config: a port-forward
// through the API server to a free local port, over WebSockets with a
// fall back to SPDY, as kubectl does.
func forwardPort(cfg *rest.Config) PortForwarder {
	return func(ctx context.Context, namespace, pod string, port int) (string, func(), error) {
		u, err := url.Parse(strings.TrimSuffix(cfg.Host, "/") + cfg.APIPath)
		if err != nil {
			return "", nil, err
		}
		u = u.JoinPath("api", "v1", "namespaces", namespace, "pods", pod, "portforward")
		transport, upgrader, err := spdy.RoundTripperFor(cfg)
		if err != nil {
			return "", nil, err
		}
		dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
		if ws, err := portforward.NewSPDYOverWebsocketDialer(u, cfg); err == nil {
			dialer = portforward.NewFallbackDialer(ws, dialer, func(err error) bool {
				return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
			})
		}
		stopCh, ready := make(chan struct{}), make(chan struct{})
		var errOut strings.Builder
		fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)}, stopCh, ready, io.Discard, &errOut)
		if err != nil {
			return "", nil, err
		}
		done := make(chan struct{})
		var forwardErr error
		go func() { forwardErr = fw.ForwardPorts(); close(done) }()
		stop := func() { close(stopCh); <-done }
		select {
		case <-ready:
		case <-done:
			if forwardErr == nil {
				return "", nil, errors.New(strings.TrimSpace(errOut.String()))
			}
			return "", nil, forwardErr
		case <-ctx.Done():
			stop()
			return "", nil, ctx.Err()
		}
		ports, err := fw.GetPorts()
		if err != nil || len(ports) == 0 {
			stop()
			return "", nil, errors.Join(errors.New("the port-forward has no local port"), err)
		}
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local))), stop, nil
	}
}
