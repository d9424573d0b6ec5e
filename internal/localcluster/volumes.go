package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/etcd-operator/etcd-operator/internal/localcluster/podenv"
)

// podVolumes prepares the volumes of one pod under its directory and knows
// where each one lives on the host.
type podVolumes struct {
	client          kubernetes.Interface
	dir             string // <pod dir>/volumes
	nodeAllocatable corev1.ResourceList
	// sources maps a volume name to its host path.
	sources map[string]string
	// tokens remembers when each projected token must be refreshed.
	tokens map[string]time.Time
	// mounted holds the tmpfs mounts the pod owns (memory emptyDirs).
	mounted []string
}

func newPodVolumes(client kubernetes.Interface, podDir string, alloc corev1.ResourceList) *podVolumes {
	return &podVolumes{client: client, dir: filepath.Join(podDir, "volumes"), nodeAllocatable: alloc, sources: map[string]string{}, tokens: map[string]time.Time{}}
}

// sync makes every volume of pod ready, refreshing Secrets, ConfigMaps,
// downward API files and tokens. A volume that cannot be made ready (a
// missing Secret, an unbound claim) is an error that names it.
func (v *podVolumes) sync(ctx context.Context, pod *corev1.Pod) error {
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if err := v.syncVolume(ctx, pod, vol); err != nil {
			return fmt.Errorf("volume %q: %w", vol.Name, err)
		}
	}
	return nil
}

func (v *podVolumes) syncVolume(ctx context.Context, pod *corev1.Pod, vol *corev1.Volume) error {
	dir := filepath.Join(v.dir, vol.Name)
	switch {
	case vol.EmptyDir != nil:
		if _, ok := v.sources[vol.Name]; ok {
			return nil
		}
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return err
		}
		if vol.EmptyDir.Medium == corev1.StorageMediumMemory {
			size := "64m"
			if vol.EmptyDir.SizeLimit != nil {
				size = fmt.Sprint(vol.EmptyDir.SizeLimit.Value())
			}
			if err := run(ctx, "mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir); err != nil {
				return err
			}
			v.mounted = append(v.mounted, dir)
		}
		v.sources[vol.Name] = dir
	case vol.HostPath != nil:
		if vol.HostPath.Type != nil && *vol.HostPath.Type == corev1.HostPathDirectoryOrCreate {
			if err := os.MkdirAll(vol.HostPath.Path, 0o755); err != nil {
				return err
			}
		}
		v.sources[vol.Name] = vol.HostPath.Path
	case vol.PersistentVolumeClaim != nil:
		path, err := v.claimPath(ctx, pod.Namespace, vol.PersistentVolumeClaim.ClaimName)
		if err != nil {
			return err
		}
		v.sources[vol.Name] = path
	case vol.Secret != nil:
		files, err := v.secretFiles(ctx, pod.Namespace, vol.Secret.SecretName, vol.Secret.Items, vol.Secret.Optional)
		if err != nil {
			return err
		}
		return v.writeFiles(vol.Name, dir, files, mode(vol.Secret.DefaultMode, 0o644))
	case vol.ConfigMap != nil:
		files, err := v.configMapFiles(ctx, pod.Namespace, vol.ConfigMap.Name, vol.ConfigMap.Items, vol.ConfigMap.Optional)
		if err != nil {
			return err
		}
		return v.writeFiles(vol.Name, dir, files, mode(vol.ConfigMap.DefaultMode, 0o644))
	case vol.DownwardAPI != nil:
		files, err := v.downwardFiles(pod, vol.DownwardAPI.Items)
		if err != nil {
			return err
		}
		return v.writeFiles(vol.Name, dir, files, mode(vol.DownwardAPI.DefaultMode, 0o644))
	case vol.Projected != nil:
		files, err := v.projectedFiles(ctx, pod, vol.Name, vol.Projected.Sources)
		if err != nil {
			return err
		}
		return v.writeFiles(vol.Name, dir, files, mode(vol.Projected.DefaultMode, 0o644))
	default:
		return fmt.Errorf("the local cluster supports emptyDir, hostPath, persistentVolumeClaim, secret, configMap, downwardAPI and projected volumes")
	}
	return nil
}

// claimPath is the host directory of a bound claim's volume.
func (v *podVolumes) claimPath(ctx context.Context, ns, claim string) (string, error) {
	pvc, err := v.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("claim %s: %w", claim, err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		return "", fmt.Errorf("claim %s is not bound yet", claim)
	}
	pv, err := v.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	switch {
	case pv.Spec.Local != nil:
		return pv.Spec.Local.Path, nil
	case pv.Spec.HostPath != nil:
		return pv.Spec.HostPath.Path, nil
	}
	return "", fmt.Errorf("volume %s is neither local nor hostPath", pv.Name)
}

// file is one file of a volume: its path inside the volume and content.
type file struct {
	path string
	data []byte
	mode *int32
}

func (v *podVolumes) secretFiles(ctx context.Context, ns, name string, items []corev1.KeyToPath, optional *bool) ([]file, error) {
	s, err := v.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", name, err)
	}
	return keyFiles("secret "+name, s.Data, items, optional)
}

func (v *podVolumes) configMapFiles(ctx context.Context, ns, name string, items []corev1.KeyToPath, optional *bool) ([]file, error) {
	cm, err := v.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("configmap %s: %w", name, err)
	}
	data := map[string][]byte{}
	for k, val := range cm.Data {
		data[k] = []byte(val)
	}
	for k, val := range cm.BinaryData {
		data[k] = val
	}
	return keyFiles("configmap "+name, data, items, optional)
}

// keyFiles lays out the keys of a Secret or ConfigMap: every key, or only
// the listed items at their paths.
func keyFiles(what string, data map[string][]byte, items []corev1.KeyToPath, optional *bool) ([]file, error) {
	var files []file
	if len(items) == 0 {
		for k, val := range data {
			files = append(files, file{path: k, data: val})
		}
		return files, nil
	}
	for _, it := range items {
		val, ok := data[it.Key]
		if !ok {
			if optional != nil && *optional {
				continue
			}
			return nil, fmt.Errorf("%s has no key %q", what, it.Key)
		}
		files = append(files, file{path: it.Path, data: val, mode: it.Mode})
	}
	return files, nil
}

func (v *podVolumes) downwardFiles(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile) ([]file, error) {
	files := make([]file, 0, len(items))
	for _, it := range items {
		var val string
		var err error
		switch {
		case it.FieldRef != nil:
			val, err = podenv.FieldRef(pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			val, err = podenv.ResourceFieldRef(pod, it.ResourceFieldRef.ContainerName, it.ResourceFieldRef, v.nodeAllocatable)
		}
		if err != nil {
			return nil, fmt.Errorf("downward API file %s: %w", it.Path, err)
		}
		files = append(files, file{path: it.Path, data: []byte(val), mode: it.Mode})
	}
	return files, nil
}

// projectedFiles gathers the sources of a projected volume. Tokens are
// requested through the TokenRequest API, bound to the pod, and renewed
// after 80% of their life, as a kubelet does.
func (v *podVolumes) projectedFiles(ctx context.Context, pod *corev1.Pod, volName string, sources []corev1.VolumeProjection) ([]file, error) {
	var files []file
	for _, src := range sources {
		var more []file
		var err error
		switch {
		case src.Secret != nil:
			more, err = v.secretFiles(ctx, pod.Namespace, src.Secret.Name, src.Secret.Items, src.Secret.Optional)
		case src.ConfigMap != nil:
			more, err = v.configMapFiles(ctx, pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional)
		case src.DownwardAPI != nil:
			more, err = v.downwardFiles(pod, src.DownwardAPI.Items)
		case src.ServiceAccountToken != nil:
			more, err = v.tokenFile(ctx, pod, volName, src.ServiceAccountToken)
		}
		if err != nil {
			return nil, err
		}
		files = append(files, more...)
	}
	return files, nil
}

func (v *podVolumes) tokenFile(ctx context.Context, pod *corev1.Pod, volName string, src *corev1.ServiceAccountTokenProjection) ([]file, error) {
	key := volName + "/" + src.Path
	path := filepath.Join(v.dir, volName, src.Path)
	if renew, ok := v.tokens[key]; ok && time.Now().Before(renew) {
		data, err := os.ReadFile(path)
		if err == nil {
			return []file{{path: src.Path, data: data}}, nil
		}
	}
	expiration := int64(3600)
	if src.ExpirationSeconds != nil {
		expiration = *src.ExpirationSeconds
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &expiration,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr, err := v.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token for service account %s: %w", sa, err)
	}
	life := time.Until(tr.Status.ExpirationTimestamp.Time)
	v.tokens[key] = time.Now().Add(life * 8 / 10)
	return []file{{path: src.Path, data: []byte(tr.Status.Token)}}, nil
}

// writeFiles writes files into dir, replacing each atomically; files that
// are no longer part of the volume are left alone.
func (v *podVolumes) writeFiles(volName, dir string, files []file, defaultMode os.FileMode) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if strings.Contains(f.path, "..") {
			return fmt.Errorf("path %q leaves the volume", f.path)
		}
		target := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if old, err := os.ReadFile(target); err == nil && string(old) == string(f.data) {
			continue
		}
		tmp := target + ".tmp"
		if err := os.WriteFile(tmp, f.data, mode(f.mode, defaultMode)); err != nil {
			return err
		}
		if err := os.Rename(tmp, target); err != nil {
			return err
		}
	}
	v.sources[volName] = dir
	return nil
}

// source is the host path of a volume, after sync.
func (v *podVolumes) source(name string) (string, bool) {
	s, ok := v.sources[name]
	return s, ok
}

// cleanup unmounts the pod's tmpfs volumes and removes its volume
// directories. Claims' data lives elsewhere and stays.
func (v *podVolumes) cleanup(ctx context.Context) {
	for _, m := range v.mounted {
		_ = run(ctx, "umount", "-l", m)
	}
	_ = os.RemoveAll(v.dir)
}

func mode(m *int32, def os.FileMode) os.FileMode {
	if m == nil {
		return def
	}
	return os.FileMode(*m)
}

// quantityBytes is a quantity in bytes, at least 1 MiB.
func quantityBytes(q resource.Quantity) int64 {
	return max(q.Value(), 1<<20)
}
