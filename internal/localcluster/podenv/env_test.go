package podenv

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeGetter serves the objects it holds; anything else is NotFound. err,
// when set, is returned by every call. calls counts the calls by object.
type fakeGetter struct {
	secrets     map[string]*corev1.Secret
	configMaps  map[string]*corev1.ConfigMap
	allocatable corev1.ResourceList
	err         error
	calls       map[string]int
}

// newGetter returns a fakeGetter holding the Secret "creds" (user, password,
// "bad=key"), a nil Secret "ghost", the ConfigMaps "settings" (b, a, 1x, "é") and "more" (a), a
// nil ConfigMap "ghost" and a node with 4 cpus and 8Gi of memory.
func newGetter() *fakeGetter {
	return &fakeGetter{
		secrets: map[string]*corev1.Secret{
			"creds": {ObjectMeta: metav1.ObjectMeta{Name: "creds"}, Data: map[string][]byte{"user": []byte("root"), "password": []byte("s3cret"), "bad=key": []byte("x")}},
			"ghost": nil,
		},
		configMaps: map[string]*corev1.ConfigMap{
			"settings": {ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"b": "2", "a": "1", "1x": "digit", "é": "accent"}},
			"more":     {ObjectMeta: metav1.ObjectMeta{Name: "more"}, Data: map[string]string{"a": "more-a"}},
			"ghost":    nil,
		},
		allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
		calls:       map[string]int{},
	}
}

func (g *fakeGetter) Secret(_ context.Context, name string) (*corev1.Secret, error) {
	g.calls["secret/"+name]++
	if g.err != nil {
		return nil, g.err
	}
	s, ok := g.secrets[name]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
	}
	return s, nil
}

func (g *fakeGetter) ConfigMap(_ context.Context, name string) (*corev1.ConfigMap, error) {
	g.calls["configmap/"+name]++
	if g.err != nil {
		return nil, g.err
	}
	cm, ok := g.configMaps[name]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("configmaps"), name)
	}
	return cm, nil
}

func (g *fakeGetter) NodeAllocatable(context.Context) (corev1.ResourceList, error) {
	g.calls["node"]++
	if g.err != nil {
		return nil, g.err
	}
	return g.allocatable, nil
}

// Env var and source shorthands.
func value(name, v string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: v} }

func field(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
}

func resourceField(name, res, divisor string) corev1.EnvVar {
	ref := &corev1.ResourceFieldSelector{Resource: res}
	if divisor != "" {
		ref.Divisor = resource.MustParse(divisor)
	}
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: ref}}
}

func secretKey(name, secret, key string, optional *bool) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key, Optional: optional,
	}}}
}

func configMapKey(name, cm, key string, optional *bool) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: cm}, Key: key, Optional: optional,
	}}}
}

func fromConfigMap(name, prefix string, optional *bool) corev1.EnvFromSource {
	return corev1.EnvFromSource{Prefix: prefix, ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Optional: optional}}
}

func fromSecret(name, prefix string, optional *bool) corev1.EnvFromSource {
	return corev1.EnvFromSource{Prefix: prefix, SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Optional: optional}}
}

var (
	yes = func() *bool { b := true; return &b }()
	no  = func() *bool { b := false; return &b }()
)

func TestEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		pod     *corev1.Pod
		getter  func(*fakeGetter)
		want    []string
		wantErr string
	}{
		{"no environment", newPod().obj(), nil, []string{}, ""},
		{"values in order", newPod().withEnv(value("B", "2"), value("A", "1"), value("EMPTY", "")).obj(), nil, []string{"B=2", "A=1", "EMPTY="}, ""},
		{"later definition wins in the first place", newPod().withEnv(value("A", "1"), value("B", "2"), value("A", "3")).obj(), nil, []string{"A=3", "B=2"}, ""},
		{
			"expansion against earlier variables only",
			newPod().withEnv(value("HOST", "etcd-0"), value("URL", "http://$(HOST):$(PORT)"), value("PORT", "2379"), value("ESC", "$$(HOST)")).obj(), nil,
			[]string{"HOST=etcd-0", "URL=http://etcd-0:$(PORT)", "PORT=2379", "ESC=$(HOST)"}, "",
		},
		{"expansion sees its own earlier value", newPod().withEnv(value("P", "/a"), value("P", "$(P):/b")).obj(), nil, []string{"P=/a:/b"}, ""},
		{"fieldRef values are not expanded", newPod().withEnv(value("X", "x"), field("N", "metadata.name")).with(func(p *corev1.Pod) { p.Name = "$(X)" }).obj(), nil, []string{"X=x", "N=$(X)"}, ""},
		{
			"envFrom ConfigMap: sorted keys, invalid names skipped",
			newPod().withEnvFrom(fromConfigMap("settings", "", nil)).obj(), nil,
			[]string{"1x=digit", "a=1", "b=2"}, "",
		},
		{
			"envFrom Secret with prefix, invalid names skipped",
			newPod().withEnvFrom(fromSecret("creds", "DB_", nil)).obj(), nil,
			[]string{"DB_password=s3cret", "DB_user=root"}, "",
		},
		{
			"later envFrom wins, env wins over envFrom and expands it",
			newPod().withEnvFrom(fromConfigMap("settings", "", nil), fromConfigMap("more", "", nil)).withEnv(value("b", "env-b"), value("c", "$(a)-$(b)")).obj(), nil,
			[]string{"1x=digit", "a=more-a", "b=env-b", "c=more-a-env-b"}, "",
		},
		{"optional envFrom object missing", newPod().withEnvFrom(fromConfigMap("nope", "", yes), fromSecret("nope", "", yes), fromConfigMap("more", "", nil)).obj(), nil, []string{"a=more-a"}, ""},
		{"nil object counts as missing", newPod().withEnvFrom(fromConfigMap("ghost", "", yes)).obj(), nil, []string{}, ""},
		{"envFrom with no source", newPod().withEnvFrom(corev1.EnvFromSource{Prefix: "X"}).obj(), nil, []string{}, ""},
		{"required envFrom ConfigMap missing", newPod().withEnvFrom(fromConfigMap("more", "", nil), fromConfigMap("nope", "", no)).obj(), nil, nil, `envFrom[1]: configMap db/nope: configmaps "nope" not found`},
		{"required envFrom Secret missing", newPod().withEnvFrom(fromSecret("nope", "", nil)).obj(), nil, nil, `envFrom[0]: secret db/nope: secrets "nope" not found`},
		{
			"optional envFrom object unreadable",
			newPod().withEnvFrom(fromSecret("creds", "", yes)).obj(), func(g *fakeGetter) { g.err = errors.New("connection refused") }, nil,
			"envFrom[0]: secret db/creds: connection refused",
		},
		{
			"fieldRef",
			newPod().withEnv(field("POD", "metadata.name"), field("NS", "metadata.namespace"), field("IPS", "status.podIPs"), field("ROLE", "metadata.labels['example.com/role']")).obj(), nil,
			[]string{"POD=etcd-0", "NS=db", "IPS=10.213.1.5,fd01::5", "ROLE=member"}, "",
		},
		{"fieldRef without apiVersion", newPod().withEnv(corev1.EnvVar{Name: "N", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}).obj(), nil, []string{"N=node-1"}, ""},
		{"fieldRef with another apiVersion", newPod().withEnv(corev1.EnvVar{Name: "N", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v2", FieldPath: "spec.nodeName"}}}).obj(), nil, nil, `env N: fieldRef: unsupported pod version "v2"`},
		{"fieldRef unsupported", newPod().withEnv(field("P", "status.phase")).obj(), nil, nil, `env P: unsupported fieldPath "status.phase"`},
		{
			"resourceFieldRef, limit falling back to node allocatable",
			newPod().withEnv(resourceField("CPU", "limits.cpu", ""), resourceField("MEM", "requests.memory", "1Mi"), resourceField("STORAGE", "limits.ephemeral-storage", "")).obj(), nil,
			[]string{"CPU=2", "MEM=512", "STORAGE=0"}, "",
		},
		{
			"resourceFieldRef without limits",
			newPod().withEnv(resourceField("CPU", "limits.cpu", ""), resourceField("MEM", "limits.memory", "1Gi")).with(func(p *corev1.Pod) { p.Spec.Containers[0].Resources = corev1.ResourceRequirements{} }).obj(), nil,
			[]string{"CPU=4", "MEM=8"}, "",
		},
		{"resourceFieldRef unsupported", newPod().withEnv(resourceField("X", "limits.gpu", "")).obj(), nil, nil, `env X: unsupported container resource "limits.gpu"`},
		{"resourceFieldRef, node unreadable", newPod().withEnv(resourceField("CPU", "limits.cpu", "")).obj(), func(g *fakeGetter) { g.err = errors.New("boom") }, nil, "env CPU: node allocatable: boom"},
		{
			"secretKeyRef and configMapKeyRef",
			newPod().withEnv(secretKey("PASS", "creds", "password", nil), configMapKey("A", "settings", "a", no), value("DSN", "$(A):$(PASS)")).obj(), nil,
			[]string{"PASS=s3cret", "A=1", "DSN=1:s3cret"}, "",
		},
		{
			"optional keys and objects missing are skipped, keeping what envFrom set",
			newPod().withEnvFrom(fromConfigMap("more", "", nil)).withEnv(
				secretKey("S1", "creds", "nope", yes), secretKey("S2", "nope", "k", yes),
				configMapKey("a", "settings", "nope", yes), configMapKey("C2", "nope", "k", yes), configMapKey("C3", "ghost", "k", yes),
				value("USE", "$(a)$(S1)")).obj(), nil,
			[]string{"a=more-a", "USE=more-a$(S1)"}, "",
		},
		{"required Secret key missing", newPod().withEnv(secretKey("PASS", "creds", "passwd", nil)).obj(), nil, nil, `env PASS: couldn't find key "passwd" in Secret db/creds`},
		{"required ConfigMap key missing", newPod().withEnv(configMapKey("LEVEL", "settings", "level", no)).obj(), nil, nil, `env LEVEL: couldn't find key "level" in ConfigMap db/settings`},
		{"required Secret missing", newPod().withEnv(secretKey("PASS", "nope", "password", nil)).obj(), nil, nil, `env PASS: key "password" of Secret db/nope: secrets "nope" not found`},
		{"required ConfigMap missing", newPod().withEnv(configMapKey("LEVEL", "nope", "level", nil)).obj(), nil, nil, `env LEVEL: key "level" of ConfigMap db/nope: configmaps "nope" not found`},
		{"required Secret nil", newPod().withEnv(secretKey("PASS", "ghost", "password", nil)).obj(), nil, nil, `env PASS: key "password" of Secret db/ghost: secrets "ghost" not found`},
		{"required ConfigMap nil", newPod().withEnv(configMapKey("LEVEL", "ghost", "level", nil)).obj(), nil, nil, `env LEVEL: key "level" of ConfigMap db/ghost: configmaps "ghost" not found`},
		{
			"optional key of an unreadable object",
			newPod().withEnv(configMapKey("LEVEL", "settings", "level", yes)).obj(), func(g *fakeGetter) { g.err = errors.New("forbidden") }, nil,
			`env LEVEL: key "level" of ConfigMap db/settings: forbidden`,
		},
		{"valueFrom without a source", newPod().withEnv(corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{}}).obj(), nil, nil, "env X: valueFrom has no source the local cluster supports"},
		{"value wins over valueFrom", newPod().withEnv(corev1.EnvVar{Name: "X", Value: "v", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}).obj(), nil, []string{"X=v"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := newGetter()
			if tt.getter != nil {
				tt.getter(g)
			}
			got, err := Env(context.Background(), tt.pod, &tt.pod.Spec.Containers[0], g)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("got %q, want an error containing %q", got, tt.wantErr)
			case tt.wantErr != "" && err.Error() != tt.wantErr:
				t.Fatalf("error %q, want %q", err, tt.wantErr)
			case tt.wantErr == "" && !reflect.DeepEqual(got, tt.want):
				t.Errorf("Env() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEnvReadsEachObjectOnce(t *testing.T) {
	t.Parallel()
	pod := newPod().
		withEnvFrom(fromConfigMap("settings", "", nil), fromSecret("creds", "", nil), fromConfigMap("nope", "", yes)).
		withEnv(configMapKey("A", "settings", "a", nil), secretKey("U", "creds", "user", nil), configMapKey("N", "nope", "k", yes),
			resourceField("CPU", "limits.cpu", ""), resourceField("MEM", "limits.memory", "")).obj()
	g := newGetter()
	if _, err := Env(context.Background(), pod, &pod.Spec.Containers[0], g); err != nil {
		t.Fatal(err)
	}
	// A missing object is asked for again: the kubelet caches only what it found.
	want := map[string]int{"configmap/settings": 1, "secret/creds": 1, "configmap/nope": 2, "node": 1}
	if !reflect.DeepEqual(g.calls, want) {
		t.Errorf("calls = %v, want %v", g.calls, want)
	}
}

func TestEnvOfAnInitContainer(t *testing.T) {
	t.Parallel()
	pod := newPod().with(func(p *corev1.Pod) {
		p.Spec.InitContainers[0].Env = []corev1.EnvVar{resourceField("CPU", "limits.cpu", ""), field("NODE", "spec.nodeName")}
	}).obj()
	got, err := Env(context.Background(), pod, &pod.Spec.InitContainers[0], newGetter())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"CPU=4", "NODE=node-1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Env() = %q, want %q", got, want)
	}
}

func TestEnvThenCommandLine(t *testing.T) {
	t.Parallel()
	pod := newPod().withEnv(field("POD", "metadata.name"), value("DATA", "/var/lib/etcd/$(POD)")).obj()
	c := &pod.Spec.Containers[0]
	c.Command = []string{"etcd", "--name=$(POD)"}
	c.Args = []string{"--data-dir=$(DATA)", "--listen=$(LATER)"}
	env, err := Env(context.Background(), pod, c, newGetter())
	if err != nil {
		t.Fatal(err)
	}
	command, args := CommandLine(c, Map(env))
	if got := strings.Join(append(command, args...), " "); got != "etcd --name=etcd-0 --data-dir=/var/lib/etcd/etcd-0 --listen=$(LATER)" {
		t.Errorf("command line = %q", got)
	}
}
