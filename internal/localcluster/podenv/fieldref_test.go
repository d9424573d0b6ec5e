package podenv

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestFieldRef(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		pod       *corev1.Pod
		fieldPath string
		want      string
		wantErr   string
	}{
		{"name", newPod().obj(), "metadata.name", "etcd-0", ""},
		{"namespace", newPod().obj(), "metadata.namespace", "db", ""},
		{"uid", newPod().obj(), "metadata.uid", "0b7e5f4c-uid", ""},
		{"label", newPod().obj(), "metadata.labels['app']", "etcd", ""},
		{"prefixed label", newPod().obj(), "metadata.labels['example.com/role']", "member", ""},
		{"absent label is empty", newPod().obj(), "metadata.labels['nope']", "", ""},
		{"annotation", newPod().obj(), "metadata.annotations['a']", "1", ""},
		{"annotation key checked in lower case", newPod().with(func(p *corev1.Pod) { p.Annotations["Example.com/x"] = "B" }).obj(), "metadata.annotations['Example.com/x']", "B", ""},
		{"label key checked as written", newPod().obj(), "metadata.labels['Example.com/x']", "", "invalid key subscript in metadata.labels['Example.com/x']"},
		{"all labels, sorted", newPod().obj(), "metadata.labels", "app=\"etcd\"\nexample.com/role=\"member\"", ""},
		{"all annotations, quoted", newPod().obj(), "metadata.annotations", "a=\"1\"\nnote=\"say \\\"hi\\\"\\n\"", ""},
		{"no labels", newPod().with(func(p *corev1.Pod) { p.Labels = nil }).obj(), "metadata.labels", "", ""},
		{"node name", newPod().obj(), "spec.nodeName", "node-1", ""},
		{"service account", newPod().obj(), "spec.serviceAccountName", "etcd", ""},
		{"host IP", newPod().obj(), "status.hostIP", "10.0.0.1", ""},
		{"host IPs", newPod().obj(), "status.hostIPs", "10.0.0.1,fd00::1", ""},
		{"pod IP", newPod().obj(), "status.podIP", "10.213.1.5", ""},
		{"pod IPs", newPod().obj(), "status.podIPs", "10.213.1.5,fd01::5", ""},
		{"pod IP from the list", newPod().with(func(p *corev1.Pod) { p.Status.PodIP = "" }).obj(), "status.podIP", "10.213.1.5", ""},
		{"pod IPs from the primary", newPod().with(func(p *corev1.Pod) { p.Status.PodIPs = nil }).obj(), "status.podIPs", "10.213.1.5", ""},
		{"host IP from the list", newPod().with(func(p *corev1.Pod) { p.Status.HostIP = "" }).obj(), "status.hostIP", "10.0.0.1", ""},
		{"host IPs from the primary", newPod().with(func(p *corev1.Pod) { p.Status.HostIPs = nil }).obj(), "status.hostIPs", "10.0.0.1", ""},
		{"no IP yet", newPod().with(func(p *corev1.Pod) { p.Status = corev1.PodStatus{} }).obj(), "status.podIPs", "", ""},
		{"unsupported path", newPod().obj(), "spec.restartPolicy", "", `unsupported fieldPath "spec.restartPolicy"`},
		{"empty path", newPod().obj(), "", "", `unsupported fieldPath ""`},
		{"subscript on a field without one", newPod().obj(), "metadata.name['x']", "", `fieldPath "metadata.name['x']" does not support a subscript`},
		{"invalid label key", newPod().obj(), "metadata.labels['a b']", "", "invalid key subscript in metadata.labels['a b']"},
		{"empty annotation key", newPod().obj(), "metadata.annotations['']", "", "invalid key subscript in metadata.annotations['']"},
		{"no path before subscript", newPod().obj(), "['app']", "", `unsupported fieldPath "['app']"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := FieldRef(tt.pod, tt.fieldPath)
			checkResult(t, got, err, tt.want, tt.wantErr)
		})
	}
}

// checkResult fails t unless (got, err) is (want, nil), or err contains
// wantErr when wantErr is set.
func checkResult(t *testing.T, got string, err error, want, wantErr string) {
	t.Helper()
	switch {
	case wantErr == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case wantErr != "" && err == nil:
		t.Fatalf("got %q, want an error containing %q", got, wantErr)
	case wantErr != "" && !strings.Contains(err.Error(), wantErr):
		t.Fatalf("error %q does not contain %q", err, wantErr)
	case wantErr == "" && got != want:
		t.Errorf("got %q, want %q", got, want)
	}
}
