package v1alpha1

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func TestDesiredReplicas(t *testing.T) {
	t.Parallel()
	tests := []struct {
		replicas *int32
		want     int32
	}{
		{nil, DefaultReplicas},
		{ptr.To[int32](1), 1},
		{ptr.To[int32](5), 5},
	}
	for _, tt := range tests {
		c := &EtcdCluster{Spec: EtcdClusterSpec{Replicas: tt.replicas}}
		if got := c.DesiredReplicas(); got != tt.want {
			t.Errorf("DesiredReplicas() with %v = %d, want %d", tt.replicas, got, tt.want)
		}
	}
}

func TestQuorum(t *testing.T) {
	t.Parallel()
	for n, want := range map[int32]int32{0: 1, 1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4, 9: 5} {
		if got := Quorum(n); got != want {
			t.Errorf("Quorum(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestStorage(t *testing.T) {
	t.Parallel()
	pvc := &EmbeddedPersistentVolumeClaim{}
	emptyDir := &corev1.EmptyDirVolumeSource{}
	tests := []struct {
		name           string
		storage        StorageSpec
		wantPersistent bool
		wantIgnored    bool
	}{
		{"nothing: emptyDir", StorageSpec{}, false, false},
		{"emptyDir", StorageSpec{EmptyDir: emptyDir}, false, false},
		{"claim", StorageSpec{VolumeClaimTemplate: pvc}, true, false},
		{"both: the claim wins", StorageSpec{EmptyDir: emptyDir, VolumeClaimTemplate: pvc}, true, true},
	}
	for _, tt := range tests {
		if got := tt.storage.UsesPersistentStorage(); got != tt.wantPersistent {
			t.Errorf("%s: UsesPersistentStorage() = %v, want %v", tt.name, got, tt.wantPersistent)
		}
		if got := tt.storage.EmptyDirIgnored(); got != tt.wantIgnored {
			t.Errorf("%s: EmptyDirIgnored() = %v, want %v", tt.name, got, tt.wantIgnored)
		}
	}
}

func TestDisruptionBudget(t *testing.T) {
	t.Parallel()
	two, one, half := intstr.FromInt32(2), intstr.FromInt32(1), intstr.FromString("50%")
	tests := []struct {
		name        string
		spec        PodDisruptionBudgetSpec
		replicas    int32
		wantMin     *intstr.IntOrString
		wantMaxUnav *intstr.IntOrString
	}{
		{"empty is quorum of 3", PodDisruptionBudgetSpec{}, 3, ptr.To(intstr.FromInt32(2)), nil},
		{"empty is quorum of 5", PodDisruptionBudgetSpec{}, 5, ptr.To(intstr.FromInt32(3)), nil},
		{"empty is quorum of 1", PodDisruptionBudgetSpec{}, 1, ptr.To(intstr.FromInt32(1)), nil},
		{"minAvailable", PodDisruptionBudgetSpec{MinAvailable: &two}, 3, &two, nil},
		{"maxUnavailable", PodDisruptionBudgetSpec{MaxUnavailable: &half}, 3, nil, &half},
		{"both: minAvailable is used", PodDisruptionBudgetSpec{MinAvailable: &two, MaxUnavailable: &one}, 3, &two, nil},
	}
	for _, tt := range tests {
		gotMin, gotMax := PodDisruptionBudgetTemplate{Spec: tt.spec}.DisruptionBudget(tt.replicas)
		if !equalIntOrString(gotMin, tt.wantMin) || !equalIntOrString(gotMax, tt.wantMaxUnav) {
			t.Errorf("%s: DisruptionBudget(%d) = (%v, %v), want (%v, %v)", tt.name, tt.replicas, gotMin, gotMax, tt.wantMin, tt.wantMaxUnav)
		}
	}
}

func TestDisruptionBudgetDoesNotAliasTheSpec(t *testing.T) {
	t.Parallel()
	two := intstr.FromInt32(2)
	tmpl := PodDisruptionBudgetTemplate{Spec: PodDisruptionBudgetSpec{MinAvailable: &two}}
	got, _ := tmpl.DisruptionBudget(3)
	*got = intstr.FromInt32(9)
	if tmpl.Spec.MinAvailable.IntValue() != 2 {
		t.Fatal("changing the returned budget changed the spec")
	}
}

func equalIntOrString(a, b *intstr.IntOrString) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func TestSecurity(t *testing.T) {
	t.Parallel()
	full := &SecuritySpec{EnableAuth: true, TLS: &TLSSpec{
		PeerSecret: "p", PeerTrustedCASecret: "p-ca",
		ServerSecret: "s", ServerTrustedCASecret: "s-ca",
		ClientSecret: "c", ClientTrustedCASecret: "c-ca",
	}}
	peerOnly := &SecuritySpec{TLS: &TLSSpec{PeerSecret: "p", PeerTrustedCASecret: "p-ca"}}
	tests := []struct {
		name                           string
		s                              *SecuritySpec
		peer, client, certAuth, authOn bool
	}{
		{"nil", nil, false, false, false, false},
		{"empty", &SecuritySpec{}, false, false, false, false},
		{"peer only", peerOnly, true, false, false, false},
		{"everything", full, true, true, true, true},
	}
	for _, tt := range tests {
		if got := tt.s.PeerTLS(); got != tt.peer {
			t.Errorf("%s: PeerTLS() = %v", tt.name, got)
		}
		if got := tt.s.ClientTLS(); got != tt.client {
			t.Errorf("%s: ClientTLS() = %v", tt.name, got)
		}
		if got := tt.s.ClientCertAuth(); got != tt.certAuth {
			t.Errorf("%s: ClientCertAuth() = %v", tt.name, got)
		}
		if got := tt.s.AuthEnabled(); got != tt.authOn {
			t.Errorf("%s: AuthEnabled() = %v", tt.name, got)
		}
	}
}

func TestPrefixesOverlap(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"/a/", "/a/", true},
		{"/a/", "/a/b/", true},
		{"/a/b/", "/a/", true},
		{"/a/", "/ab/", false},
		{"/a/", "/b/", false},
	} {
		if got := PrefixesOverlap(tt.a, tt.b); got != tt.want {
			t.Errorf("PrefixesOverlap(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestTenantNames(t *testing.T) {
	t.Parallel()
	tn := &EtcdTenant{ObjectMeta: metav1.ObjectMeta{Name: "k0s"}}
	if tn.EffectivePrefix() != "/k0s/" || tn.UserName() != "tenant-k0s" || tn.ConnectionSecretName() != "k0s-etcd" {
		t.Errorf("prefix %q, user %q, Secret %q", tn.EffectivePrefix(), tn.UserName(), tn.ConnectionSecretName())
	}
	tn.Spec.Prefix = "/control-planes/k0s/"
	if tn.EffectivePrefix() != "/control-planes/k0s/" {
		t.Errorf("prefix %q, want spec.prefix", tn.EffectivePrefix())
	}
}
