package kubectletcd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// StatusView is what status shows, and its -o json|yaml form: the
// EtcdCluster's status with each member's Pod beside it.
type StatusView struct {
	Name               string             `json:"name"`
	Namespace          string             `json:"namespace"`
	Paused             bool               `json:"paused"`
	Generation         int64              `json:"generation"`
	ObservedGeneration int64              `json:"observedGeneration"`
	DesiredReplicas    int32              `json:"desiredReplicas"`
	Replicas           int32              `json:"replicas"`
	ReadyReplicas      int32              `json:"readyReplicas"`
	UpdatedReplicas    int32              `json:"updatedReplicas"`
	Version            string             `json:"version,omitempty"`
	ClusterID          string             `json:"clusterID,omitempty"`
	Endpoints          []string           `json:"endpoints,omitempty"`
	CASecretName       string             `json:"caSecretName,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
	Members            []MemberView       `json:"members"`
	// PodsUnavailable says why Pod, node and restarts are missing.
	PodsUnavailable string `json:"podsUnavailable,omitempty"`
	// Live is set when Members and ClusterID were read from etcd itself
	// (--live), not from the status the operator keeps.
	Live bool `json:"live,omitempty"`
}

// MemberView is one member: what the operator last observed of it in
// etcd, and its Pod. A Pod that is in no member entry (being added or
// removed) is a MemberView with only Name and the Pod's fields.
type MemberView struct {
	Name string `json:"name"`
	// ID is the etcd member ID in hexadecimal.
	ID string `json:"id,omitempty"`
	// Role is leader, voter or learner.
	Role string `json:"role,omitempty"`
	// Healthy is nil while the member was never probed.
	Healthy       *bool        `json:"healthy,omitempty"`
	DBSize        int64        `json:"dbSize,omitempty"`
	DBSizeInUse   int64        `json:"dbSizeInUse,omitempty"`
	RaftTerm      uint64       `json:"raftTerm,omitempty"`
	RaftIndex     uint64       `json:"raftIndex,omitempty"`
	Version       string       `json:"version,omitempty"`
	Alarms        []string     `json:"alarms,omitempty"`
	LastError     string       `json:"lastError,omitempty"`
	LastProbeTime *metav1.Time `json:"lastProbeTime,omitempty"`
	// Pod is the state of the member's Pod (Running, Pending,
	// Terminating, a container's waiting reason such as
	// CrashLoopBackOff), "Missing" when there is none; empty when Pods
	// could not be read.
	Pod      string `json:"pod,omitempty"`
	Node     string `json:"node,omitempty"`
	Restarts *int32 `json:"restarts,omitempty"`
}

// Roles as the plugin shows them.
const (
	roleLeader  = "leader"
	roleVoter   = "voter"
	roleLearner = "learner"
)

const podMissing = "Missing"

// buildView joins the cluster's status and its member Pods. pods is nil
// when they could not be listed; podsErr then says why.
func buildView(c *etcdv1alpha1.EtcdCluster, pods []corev1.Pod, podsErr error) StatusView {
	v := StatusView{
		Name:               c.Name,
		Namespace:          c.Namespace,
		Paused:             c.IsPaused(),
		Generation:         c.Generation,
		ObservedGeneration: c.Status.ObservedGeneration,
		DesiredReplicas:    c.DesiredReplicas(),
		Replicas:           c.Status.Replicas,
		ReadyReplicas:      c.Status.ReadyReplicas,
		UpdatedReplicas:    c.Status.UpdatedReplicas,
		Version:            c.Status.Version,
		ClusterID:          c.Status.ClusterID,
		Endpoints:          c.Status.Endpoints,
		CASecretName:       c.Status.CASecretName,
		Conditions:         c.Status.Conditions,
		Members:            []MemberView{},
	}
	if podsErr != nil {
		v.PodsUnavailable = podsErr.Error()
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		byName[pods[i].Name] = &pods[i]
	}
	for _, m := range c.Status.Members {
		mv := MemberView{
			Name:          m.Name,
			ID:            m.ID,
			Role:          roleOf(m.Role),
			DBSize:        m.DBSize,
			DBSizeInUse:   m.DBSizeInUse,
			RaftTerm:      m.RaftTerm,
			RaftIndex:     m.RaftIndex,
			Version:       m.Version,
			Alarms:        m.Alarms,
			LastError:     m.LastError,
			LastProbeTime: m.LastProbeTime,
		}
		if m.Healthy || m.LastProbeTime != nil || m.LastError != "" {
			healthy := m.Healthy
			mv.Healthy = &healthy
		}
		if podsErr == nil {
			mv.Pod = podMissing
			if p := byName[m.Name]; p != nil {
				setPod(&mv, p)
				delete(byName, m.Name)
			}
		}
		v.Members = append(v.Members, mv)
	}
	v.Members = appendPodsOnly(v.Members, byName)
	return v
}

// appendPodsOnly appends to members, by name, a row for each Pod of pods
// that is in no member entry (being added or removed).
func appendPodsOnly(members []MemberView, pods map[string]*corev1.Pod) []MemberView {
	extra := make([]string, 0, len(pods))
	for name := range pods {
		extra = append(extra, name)
	}
	sort.Strings(extra)
	for _, name := range extra {
		mv := MemberView{Name: name}
		setPod(&mv, pods[name])
		members = append(members, mv)
	}
	return members
}

func roleOf(r etcdv1alpha1.MemberRole) string {
	switch r {
	case etcdv1alpha1.MemberRoleLeader:
		return roleLeader
	case etcdv1alpha1.MemberRoleFollower:
		return roleVoter
	case etcdv1alpha1.MemberRoleLearner:
		return roleLearner
	}
	return ""
}

func setPod(mv *MemberView, p *corev1.Pod) {
	mv.Pod = podState(p)
	mv.Node = p.Spec.NodeName
	var restarts int32
	for _, cs := range p.Status.ContainerStatuses {
		restarts += cs.RestartCount
	}
	mv.Restarts = &restarts
}

// podState is a Pod's state in a word, as kubectl get pods shows it:
// Terminating, a waiting container's reason, NotReady for a running Pod
// that is not ready, or else its phase.
func podState(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "Terminating"
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Waiting != nil && cs.State.Waiting.Reason != "" {
			return cs.State.Waiting.Reason
		}
	}
	if p.Status.Phase == corev1.PodRunning {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue {
				return "NotReady"
			}
		}
	}
	if p.Status.Phase == "" {
		return string(corev1.PodPending)
	}
	return string(p.Status.Phase)
}

// view reads a cluster and its member Pods. Pods the user may not list
// leave their columns empty instead of failing the command.
// With live, the members are read from etcd itself (liveView), which
// needs the Pods.
func (s *session) view(ctx context.Context, name string, live bool) (StatusView, error) {
	c, err := s.getCluster(ctx, name)
	if err != nil {
		return StatusView{}, err
	}
	pods := &corev1.PodList{}
	err = s.client.List(ctx, pods, client.InNamespace(s.namespace), client.MatchingLabels{etcdv1alpha1.LabelCluster: c.Name})
	switch {
	case err != nil && live:
		return StatusView{}, apiError(err, "list", resourcePods, "pods", "", s.namespace)
	case err != nil:
		return buildView(c, nil, apiError(err, "list", resourcePods, "pods", "", s.namespace)), nil
	case live:
		return s.liveView(ctx, c, pods.Items, buildView(c, pods.Items, nil))
	}
	return buildView(c, pods.Items, nil), nil
}

// Output formats of status and members.
const (
	outputText = ""
	outputWide = "wide"
	outputJSON = "json"
	outputYAML = "yaml"
)

func addOutputFlag(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", outputText, "Output format: wide (every column whatever the terminal width), json or yaml.")
}

func checkOutput(output string) error {
	switch output {
	case outputText, outputWide, outputJSON, outputYAML:
		return nil
	}
	return fmt.Errorf("unknown output format %q: use wide, json or yaml", output)
}

func printObject(w io.Writer, output string, v any) error {
	var b []byte
	var err error
	if output == outputJSON {
		b, err = json.MarshalIndent(v, "", "    ")
		b = append(b, '\n')
	} else {
		b, err = yaml.Marshal(v)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// addLiveFlag adds --live: members read from etcd itself.
func addLiveFlag(cmd *cobra.Command, live *bool) {
	cmd.Flags().BoolVar(live, "live", false, "Read the members from etcd itself, through a port-forward to each member Pod, instead of from the status the operator keeps (needs get on the cluster's client Secrets and create on pods/portforward).")
}

func newStatusCommand(o *Options) *cobra.Command {
	var output string
	var live bool
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show an EtcdCluster on one screen: conditions, version, endpoints and members",
		Long: `Show an EtcdCluster on one screen: its conditions, version, endpoints and a
table of its members (role, health, database size, raft index, Pod, node,
restarts), from the status the operator keeps and the member Pods. On a
narrow terminal the least needed member columns are left out; -o wide
shows them all.`,
		Args: oneName("EtcdCluster"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, v, err := o.viewFor(cmd, output, args[0], live)
			if err != nil {
				return err
			}
			if output == outputJSON || output == outputYAML {
				return printObject(o.Out, output, v)
			}
			return renderStatus(o.Out, v, s.width(output), o.Now())
		},
	}
	addOutputFlag(cmd, &output)
	addLiveFlag(cmd, &live)
	return cmd
}

// viewFor checks the output format, opens a session and reads the view of
// the EtcdCluster name: what status and members start from.
func (o *Options) viewFor(cmd *cobra.Command, output, name string, live bool) (*session, StatusView, error) {
	if err := checkOutput(output); err != nil {
		return nil, StatusView{}, err
	}
	s, err := o.session()
	if err != nil {
		return nil, StatusView{}, err
	}
	v, err := s.view(cmd.Context(), name, live)
	if err != nil {
		return nil, StatusView{}, err
	}
	return s, v, nil
}

func newMembersCommand(o *Options) *cobra.Command {
	var output string
	var live bool
	cmd := &cobra.Command{
		Use:   "members NAME",
		Short: "List an EtcdCluster's members: role, health, database size, raft index, Pod",
		Args:  oneName("EtcdCluster"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, v, err := o.viewFor(cmd, output, args[0], live)
			if err != nil {
				return err
			}
			if len(v.Members) == 0 {
				return fmt.Errorf("etcdcluster %s has no members yet%s", v.Name, readiness(v.Conditions))
			}
			if output == outputJSON || output == outputYAML {
				return printObject(o.Out, output, v.Members)
			}
			return renderMembers(o.Out, v, s.width(output), o.Now())
		},
	}
	addOutputFlag(cmd, &output)
	addLiveFlag(cmd, &live)
	return cmd
}

// width is the width tables must fit in: none for -o wide.
func (s *session) width(output string) int {
	if output == outputWide {
		return 0
	}
	return s.Width()
}

// readiness is ": Ready=False (Reason: message)" for a cluster or tenant
// that is not Ready, or what is known of it.
func readiness(conds []metav1.Condition) string {
	c := meta.FindStatusCondition(conds, etcdv1alpha1.ConditionReady)
	if c == nil {
		return ": it has no Ready condition yet (is the operator running?)"
	}
	if c.Message == "" {
		return fmt.Sprintf(": Ready=%s (%s)", c.Status, c.Reason)
	}
	return fmt.Sprintf(": Ready=%s (%s: %s)", c.Status, c.Reason, c.Message)
}
