package kubectletcd

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// Verbs that change etcd itself do not talk to etcd: they ask the
// operator, through an annotation on the EtcdCluster, which carries the
// request out as a step of its maintenance. The operator stays the only
// writer of the cluster's etcd state, so a request never races a
// membership change or a defragmentation it is doing.

// waitFlags are --wait and --timeout of the verbs that ask the operator.
type waitFlags struct {
	wait    bool
	timeout time.Duration
}

func (w *waitFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&w.wait, "wait", false, "wait until the operator has carried the request out (the annotation is gone), showing what it waits for")
	cmd.Flags().DurationVar(&w.timeout, "timeout", 10*time.Minute, "how long --wait waits")
}

func newMoveLeaderCommand(o *Options) *cobra.Command {
	var to string
	var w waitFlags
	cmd := &cobra.Command{
		Use:   "move-leader NAME --to MEMBER",
		Short: "Ask the operator to move etcd's leadership to a member",
		Long: `Ask the operator to move etcd's leadership to MEMBER, a voting member of
the EtcdCluster NAME. It sets the annotation ` + etcdv1alpha1.AnnotationMoveLeader + `=MEMBER;
the operator moves leadership once MEMBER is a healthy voter, raises the
event LeaderMoved, and removes the annotation. While it waits, its
Maintenance condition says why.`,
		Args: oneName("EtcdCluster"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to == "" {
				return fmt.Errorf("%s needs --to MEMBER: the member to lead", cmd.CommandPath())
			}
			s, err := o.session()
			if err != nil {
				return err
			}
			if err := s.moveLeader(cmd.Context(), args[0], to); err != nil || !w.wait {
				return err
			}
			return s.awaitRequest(cmd.Context(), args[0], etcdv1alpha1.AnnotationMoveLeader, to, w.timeout)
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the member to lead (kubectl etcd members NAME lists them)")
	w.add(cmd)
	return cmd
}

func newDefragCommand(o *Options) *cobra.Command {
	var member string
	var w waitFlags
	cmd := &cobra.Command{
		Use:   "defrag NAME [--member MEMBER]",
		Short: "Ask the operator to defragment a member, or every member one at a time",
		Long: `Ask the operator to defragment the databases of the EtcdCluster NAME:
MEMBER alone, or without --member every voting member, one at a time,
followers first and the leader last. A member does not serve while it
defragments, so the operator goes on only while every member is healthy.
It sets the annotation ` + etcdv1alpha1.AnnotationDefragment + `=MEMBER (or all); the operator raises the
event Defragmented for each member and removes the annotation when done.`,
		Args: oneName("EtcdCluster"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.session()
			if err != nil {
				return err
			}
			if err := s.defrag(cmd.Context(), args[0], member); err != nil || !w.wait {
				return err
			}
			value := member
			if value == "" {
				value = etcdv1alpha1.DefragmentAll
			}
			return s.awaitRequest(cmd.Context(), args[0], etcdv1alpha1.AnnotationDefragment, value, w.timeout)
		},
	}
	cmd.Flags().StringVar(&member, "member", "", "the member to defragment (default: every voting member)")
	w.add(cmd)
	return cmd
}

// requestMember finds member in the status of c, or says which members
// there are.
func requestMember(c *etcdv1alpha1.EtcdCluster, member string) (etcdv1alpha1.MemberStatus, error) {
	var names []string
	for _, m := range c.Status.Members {
		if m.Name == member {
			return m, nil
		}
		names = append(names, m.Name)
	}
	if len(names) == 0 {
		return etcdv1alpha1.MemberStatus{}, fmt.Errorf("etcdcluster %s has no members yet: wait until it has formed (kubectl etcd status %s)", c.Name, c.Name)
	}
	slices.Sort(names)
	return etcdv1alpha1.MemberStatus{}, fmt.Errorf("etcdcluster %s has no member %s (its members: %s)", c.Name, member, strings.Join(names, ", "))
}

func (s *session) moveLeader(ctx context.Context, name, to string) error {
	c, err := s.getCluster(ctx, name)
	if err != nil {
		return err
	}
	m, err := requestMember(c, to)
	if err != nil {
		return err
	}
	switch m.Role {
	case etcdv1alpha1.MemberRoleLearner:
		return fmt.Errorf("member %s of etcdcluster %s is a learner, which cannot lead: ask again once the operator has promoted it", to, name)
	case etcdv1alpha1.MemberRoleLeader:
		_, err := fmt.Fprintf(s.Out, "member %s leads etcdcluster %s already: nothing to do\n", to, name)
		return err
	}
	s.warnings(c, m)
	if err := s.request(ctx, c, etcdv1alpha1.AnnotationMoveLeader, to); err != nil {
		return err
	}
	_, err = fmt.Fprintf(s.Out, `etcdcluster.etcd.aenix.io/%s: asked the operator to move leadership to %s (annotation %s=%s)
The operator moves it once %s is a healthy voter, raises the event LeaderMoved and removes the annotation. Follow it with:
  kubectl etcd status %s -n %s
  kubectl get events -n %s --field-selector involvedObject.kind=EtcdCluster,involvedObject.name=%s
`, name, to, etcdv1alpha1.AnnotationMoveLeader, to, to, name, s.namespace, s.namespace, name)
	return err
}

func (s *session) defrag(ctx context.Context, name, member string) error {
	c, err := s.getCluster(ctx, name)
	if err != nil {
		return err
	}
	value, what := etcdv1alpha1.DefragmentAll, "every voting member, one at a time, followers first and the leader last"
	if member != "" {
		m, err := requestMember(c, member)
		if err != nil {
			return err
		}
		if m.Role == etcdv1alpha1.MemberRoleLearner {
			return fmt.Errorf("member %s of etcdcluster %s is a learner, which etcd does not defragment: ask again once the operator has promoted it", member, name)
		}
		s.warnings(c, m)
		value, what = member, member
	} else {
		if len(c.Status.Members) == 0 {
			return fmt.Errorf("etcdcluster %s has no members yet: wait until it has formed (kubectl etcd status %s)", name, name)
		}
		s.warnings(c, c.Status.Members...)
	}
	if err := s.request(ctx, c, etcdv1alpha1.AnnotationDefragment, value); err != nil {
		return err
	}
	_, err = fmt.Fprintf(s.Out, `etcdcluster.etcd.aenix.io/%s: asked the operator to defragment %s (annotation %s=%s)
A member does not serve while it defragments: the operator goes on only while every member is healthy, raises the event Defragmented for each member and removes the annotation when done. Follow it with:
  kubectl etcd status %s -n %s
  kubectl get events -n %s --field-selector involvedObject.kind=EtcdCluster,involvedObject.name=%s
`, name, what, etcdv1alpha1.AnnotationDefragment, value, name, s.namespace, s.namespace, name)
	return err
}

// warnings tells on stderr why a request may wait: the cluster is
// paused, a member did not answer the operator's last probe, another
// request of the same kind is replaced.
func (s *session) warnings(c *etcdv1alpha1.EtcdCluster, members ...etcdv1alpha1.MemberStatus) {
	w := func(format string, args ...any) { _, _ = fmt.Fprintf(s.ErrOut, "warning: "+format+"\n", args...) }
	if c.IsPaused() {
		w("etcdcluster %s is paused: the request waits until kubectl etcd resume %s", c.Name, c.Name)
	}
	for _, m := range members {
		if !m.Healthy {
			w("member %s did not answer the operator's last probe: the request waits until it does", m.Name)
		}
	}
}

// request sets annotation to value with a merge patch, which touches no
// other field; a new defragmentation request also drops the progress the
// operator recorded for an earlier one. The same request pending already
// is left as it is, progress and all.
func (s *session) request(ctx context.Context, c *etcdv1alpha1.EtcdCluster, annotation, value string) error {
	if was, ok := c.Annotations[annotation]; ok {
		if was == value {
			_, _ = fmt.Fprintf(s.ErrOut, "the same request is pending already (%s=%s): left as it is\n", annotation, was)
			return nil
		}
		_, _ = fmt.Fprintf(s.ErrOut, "warning: this replaces the pending request %s=%s\n", annotation, was)
	}
	annotations := map[string]any{annotation: value}
	if annotation == etcdv1alpha1.AnnotationDefragment {
		annotations[etcdv1alpha1.AnnotationDefragmented] = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	if err := s.client.Patch(ctx, c, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return apiError(err, "patch", resourceClusters, "etcdcluster", c.Name, s.namespace)
	}
	return nil
}

// awaitRequest waits until the operator has removed annotation=value
// from the EtcdCluster name (the request is done), telling on stderr
// what its Maintenance condition says meanwhile. Another value in its
// place (another request) or the timeout ends the wait with an error.
func (s *session) awaitRequest(ctx context.Context, name, annotation, value string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	said := ""
	for {
		c, err := s.getCluster(ctx, name)
		if err != nil {
			return err
		}
		now, pending := c.Annotations[annotation]
		switch {
		case !pending:
			_, err := fmt.Fprintf(s.Out, "etcdcluster.etcd.aenix.io/%s: done (%s=%s)\n", name, annotation, value)
			return err
		case now != value:
			return fmt.Errorf("another request replaced this one while waiting (%s=%s): no longer waiting for it", annotation, now)
		}
		maintenance := readiness(c.Status.Conditions)
		if m := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionMaintenance); m != nil {
			maintenance = fmt.Sprintf("%s (%s): %s", m.Reason, m.Status, m.Message)
		}
		if maintenance != said {
			_, _ = fmt.Fprintf(s.ErrOut, "waiting: Maintenance %s\n", maintenance)
			said = maintenance
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the request %s=%s is not done after %s; the operator's Maintenance condition: %s", annotation, value, timeout, said)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(s.waitPoll()):
		}
	}
}

// waitPoll is how often --wait looks.
func (s *session) waitPoll() time.Duration {
	if s.WaitPoll > 0 {
		return s.WaitPoll
	}
	return time.Second
}
