package kubectletcd

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

func newPauseCommand(o *Options, pause bool) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pause NAME",
		Short: "Stop the operator from changing an EtcdCluster (its status keeps being reported)",
		Long: `Stop the operator from changing an EtcdCluster: membership, Pods and
maintenance stay as they are until kubectl etcd resume NAME. The status
keeps being reported. It sets the annotation ` + etcdv1alpha1.AnnotationPaused + `=true.`,
		Args: oneName("EtcdCluster"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.session()
			if err != nil {
				return err
			}
			return s.setPaused(cmd.Context(), args[0], pause)
		},
	}
	if !pause {
		cmd.Use = "resume NAME"
		cmd.Short = "Let the operator change a paused EtcdCluster again"
		cmd.Long = `Let the operator change a paused EtcdCluster again: it removes the
annotation ` + etcdv1alpha1.AnnotationPaused + `.`
	}
	return cmd
}

// setPaused sets or removes the pause annotation with a merge patch,
// which touches no other field.
func (s *session) setPaused(ctx context.Context, name string, pause bool) error {
	c, err := s.getCluster(ctx, name)
	if err != nil {
		return err
	}
	if c.IsPaused() == pause {
		if pause {
			_, err = fmt.Fprintf(s.Out, "etcdcluster.etcd.aenix.io/%s is already paused\n", name)
		} else {
			_, err = fmt.Fprintf(s.Out, "etcdcluster.etcd.aenix.io/%s is not paused\n", name)
		}
		return err
	}
	patch := client.MergeFrom(c.DeepCopy())
	if pause {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[etcdv1alpha1.AnnotationPaused] = "true"
	} else {
		delete(c.Annotations, etcdv1alpha1.AnnotationPaused)
	}
	if err := s.client.Patch(ctx, c, patch); err != nil {
		return apiError(err, "patch", resourceClusters, "etcdcluster", name, s.namespace)
	}
	if pause {
		_, err = fmt.Fprintf(s.Out, "etcdcluster.etcd.aenix.io/%s paused: the operator changes nothing of it until kubectl etcd resume %s\n", name, name)
	} else {
		_, err = fmt.Fprintf(s.Out, "etcdcluster.etcd.aenix.io/%s resumed\n", name)
	}
	return err
}
