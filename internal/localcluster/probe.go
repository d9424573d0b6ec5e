package localcluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeKind is which of a container's probes runs.
type probeKind string

const (
	startupProbe   probeKind = "Startup"
	livenessProbe  probeKind = "Liveness"
	readinessProbe probeKind = "Readiness"
)

// probeTarget is what a probe needs to reach the container.
type probeTarget struct {
	podIP string
	pid   int
	// argv maps an exec probe's command line to host paths.
	argv func([]string) ([]string, error)
}

// runProbes runs the container's probes until ctx ends: the startup probe
// first, then liveness and readiness. onResult is called on every change of
// a probe's verdict.
func runProbes(ctx context.Context, c *corev1.Container, target probeTarget, onResult func(probeKind, bool, string)) {
	if c.StartupProbe != nil {
		if !probeLoop(ctx, c, c.StartupProbe, startupProbe, target, onResult, true) {
			return
		}
	}
	onResult(startupProbe, true, "")
	if c.LivenessProbe != nil {
		go probeLoop(ctx, c, c.LivenessProbe, livenessProbe, target, onResult, false)
	}
	if c.ReadinessProbe != nil {
		go probeLoop(ctx, c, c.ReadinessProbe, readinessProbe, target, onResult, false)
	} else {
		onResult(readinessProbe, true, "")
	}
}

// probeLoop probes every period, applying the thresholds; with untilSuccess
// it returns true at the first verdict of success (a startup probe). It
// returns false when ctx ends.
func probeLoop(ctx context.Context, c *corev1.Container, p *corev1.Probe, kind probeKind, target probeTarget, onResult func(probeKind, bool, string), untilSuccess bool) bool {
	period := seconds(p.PeriodSeconds, 10)
	timeout := seconds(p.TimeoutSeconds, 1)
	successThreshold, failureThreshold := orDefault(p.SuccessThreshold, 1), orDefault(p.FailureThreshold, 3)
	if !sleepCtx(ctx, seconds(p.InitialDelaySeconds, 0)) {
		return false
	}
	successes, failures := int32(0), int32(0)
	for {
		ok, msg := probeOnce(ctx, c, p, target, timeout)
		if ok {
			successes, failures = successes+1, 0
			if successes >= successThreshold {
				onResult(kind, true, "")
				if untilSuccess {
					return true
				}
			}
		} else {
			successes, failures = 0, failures+1
			if failures >= failureThreshold {
				onResult(kind, false, msg)
			}
		}
		if !sleepCtx(ctx, period) {
			return false
		}
	}
}

// probeOnce runs one probe and says whether it passed, and why not.
func probeOnce(ctx context.Context, c *corev1.Container, p *corev1.Probe, target probeTarget, timeout time.Duration) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case p.HTTPGet != nil:
		return probeHTTP(ctx, c, p.HTTPGet, target.podIP)
	case p.TCPSocket != nil:
		port, err := resolvePort(c, p.TCPSocket.Port)
		if err != nil {
			return false, err.Error()
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = target.podIP
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return false, err.Error()
		}
		_ = conn.Close()
		return true, ""
	case p.Exec != nil:
		argv, err := target.argv(p.Exec.Command)
		if err != nil {
			return false, err.Error()
		}
		args := append([]string{"--target", strconv.Itoa(target.pid), "--net", "--mount", "--uts", "--root", "--wd", "--"}, argv...)
		out, err := exec.CommandContext(ctx, "nsenter", args...).CombinedOutput()
		if err != nil {
			return false, fmt.Sprintf("%v: %s", err, strings.TrimSpace(string(out)))
		}
		return true, ""
	default:
		return false, "the local cluster runs httpGet, tcpSocket and exec probes only"
	}
}

func probeHTTP(ctx context.Context, c *corev1.Container, g *corev1.HTTPGetAction, podIP string) (bool, string) {
	port, err := resolvePort(c, g.Port)
	if err != nil {
		return false, err.Error()
	}
	host := g.Host
	if host == "" {
		host = podIP
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: g.Path}
	if i := strings.Index(g.Path, "?"); i >= 0 {
		u.Path, u.RawQuery = g.Path[:i], g.Path[i+1:]
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, err.Error()
	}
	for _, h := range g.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	// Like a kubelet: HTTPS probes do not verify the certificate.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // as a kubelet does
	resp, err := client.Do(req)
	if err != nil {
		return false, err.Error()
	}
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return false, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)
	}
	return true, ""
}

// resolvePort turns a probe's port (a number or a named container port)
// into a number.
func resolvePort(c *corev1.Container, port intstr.IntOrString) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.Name, port.StrVal)
}

func seconds(v int32, def int32) time.Duration {
	if v <= 0 {
		v = def
	}
	return time.Duration(v) * time.Second
}

func orDefault(v, def int32) int32 {
	if v <= 0 {
		return def
	}
	return v
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
