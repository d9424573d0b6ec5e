package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

const (
	annSelectedNode  = "volume.kubernetes.io/selected-node"
	annProvisionedBy = "pv.kubernetes.io/provisioned-by"
)

// provisioner is the dynamic provisioner of the default StorageClass. Each
// claim gets a directory under <state>/volumes on its node, holding a tmpfs
// of the claim's size: the data outlives pods, the size limit is real (a
// full volume fails writes with ENOSPC), and growing the claim grows it.
type provisioner struct {
	cfg    Config
	client kubernetes.Interface
}

// storageClass is the default StorageClass of the local cluster.
func storageClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        StorageClassName,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:          Provisioner,
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		AllowVolumeExpansion: ptr.To(true),
	}
}

func (p *provisioner) run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("provisioner")
	for {
		if err := p.sync(ctx); err != nil && ctx.Err() == nil {
			logger.Info("Provisioning pass failed", "err", err)
		}
		if !sleepCtx(ctx, time.Second) {
			return
		}
	}
}

// sync provisions claims that wait for a volume, grows volumes whose claim
// asks for more, and deletes released volumes.
func (p *provisioner) sync(ctx context.Context) error {
	classes, err := p.client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ours := map[string]*storagev1.StorageClass{}
	for i := range classes.Items {
		if classes.Items[i].Provisioner == Provisioner {
			ours[classes.Items[i].Name] = &classes.Items[i]
		}
	}
	pvcs, err := p.client.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range pvcs.Items {
		pvc := &pvcs.Items[i]
		class, ok := ours[ptr.Deref(pvc.Spec.StorageClassName, "")]
		if !ok || pvc.DeletionTimestamp != nil {
			continue
		}
		switch {
		case pvc.Spec.VolumeName == "" && pvc.Annotations[annSelectedNode] != "":
			err = p.provision(ctx, pvc, class)
		case pvc.Spec.VolumeName != "" && pvc.Status.Phase == corev1.ClaimBound:
			err = p.expand(ctx, pvc, class)
		}
		if err != nil {
			return fmt.Errorf("claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
		}
	}
	pvs, err := p.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		if pv.Annotations[annProvisionedBy] == Provisioner && pv.Status.Phase == corev1.VolumeReleased && pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete {
			if err := p.delete(ctx, pv); err != nil {
				return fmt.Errorf("volume %s: %w", pv.Name, err)
			}
		}
	}
	return nil
}

func (p *provisioner) volumePath(name string) string { return filepath.Join(p.cfg.volumesDir(), name) }

func (p *provisioner) provision(ctx context.Context, pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) error {
	name := "pvc-" + string(pvc.UID)
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	path := p.volumePath(name)
	if err := mountSized(ctx, path, quantityBytes(size)); err != nil {
		return err
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annProvisionedBy: Provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: ptr.Deref(class.ReclaimPolicy, corev1.PersistentVolumeReclaimDelete),
			StorageClassName:              class.Name,
			VolumeMode:                    pvc.Spec.VolumeMode,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: path}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{pvc.Annotations[annSelectedNode]}}},
			}}}},
		},
	}
	if len(pv.Spec.AccessModes) == 0 {
		pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	_, err := p.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// expand grows the volume of a claim that asks for more than it has, if its
// class allows expansion.
func (p *provisioner) expand(ctx context.Context, pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) error {
	want := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	have := pvc.Status.Capacity[corev1.ResourceStorage]
	if want.Cmp(have) <= 0 || !ptr.Deref(class.AllowVolumeExpansion, false) {
		return nil
	}
	pv, err := p.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || pv.Annotations[annProvisionedBy] != Provisioner || pv.Spec.Local == nil {
		return err
	}
	if err := run(ctx, "mount", "-o", "remount,size="+strconv.FormatInt(quantityBytes(want), 10), pv.Spec.Local.Path); err != nil {
		return err
	}
	pv.Spec.Capacity[corev1.ResourceStorage] = want
	if _, err := p.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
		return err
	}
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: want}
	pvc.Status.Conditions = nil
	pvc.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: want}
	_, err = p.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
	return err
}

func (p *provisioner) delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	if pv.Spec.Local != nil {
		unmountAll(ctx, pv.Spec.Local.Path)
		if err := os.RemoveAll(pv.Spec.Local.Path); err != nil {
			return err
		}
	}
	err := p.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// mountSized makes path a tmpfs of size bytes, unless it already is one.
func mountSized(ctx context.Context, path string, size int64) error {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return err
	}
	if isMountPoint(path) {
		return nil
	}
	return run(ctx, "mount", "-t", "tmpfs", "-o", "size="+strconv.FormatInt(size, 10)+",mode=0777", "tmpfs", path)
}

// isMountPoint tells whether path is a mount point.
func isMountPoint(path string) bool {
	return run(context.Background(), "mountpoint", "-q", path) == nil
}

// unmountAll unmounts path until it is no longer a mount point.
func unmountAll(ctx context.Context, path string) {
	for i := 0; i < 10 && isMountPoint(path); i++ {
		_ = run(ctx, "umount", "-l", path)
	}
}
