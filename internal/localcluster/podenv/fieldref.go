package podenv

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FieldRef resolves a downward-API field path of pod as the kubelet does for
// an env var's valueFrom.fieldRef and a downwardAPI volume item:
//
//   - metadata.name, metadata.namespace, metadata.uid;
//   - metadata.labels['k'] and metadata.annotations['k']: the value, empty
//     when the key is absent (the key must be a valid label or annotation
//     key);
//   - metadata.labels and metadata.annotations: the whole map as sorted
//     k="v" lines (values Go-quoted), as in a downwardAPI volume file;
//   - spec.nodeName, spec.serviceAccountName;
//   - status.hostIP, status.podIP: the primary address; status.hostIPs,
//     status.podIPs: all addresses, comma-separated. They are read from the
//     pod's status, so the caller sets the addresses it assigned first.
//
// Any other path is an error.
func FieldRef(pod *corev1.Pod, fieldPath string) (string, error) {
	if path, key, ok := splitSubscript(fieldPath); ok {
		switch path {
		case "metadata.labels":
			if errs := validation.IsQualifiedName(key); len(errs) != 0 {
				return "", fmt.Errorf("invalid key subscript in %s: %s", fieldPath, strings.Join(errs, "; "))
			}
			return pod.Labels[key], nil
		case "metadata.annotations":
			if errs := validation.IsQualifiedName(strings.ToLower(key)); len(errs) != 0 {
				return "", fmt.Errorf("invalid key subscript in %s: %s", fieldPath, strings.Join(errs, "; "))
			}
			return pod.Annotations[key], nil
		}
		return "", fmt.Errorf("fieldPath %q does not support a subscript", fieldPath)
	}
	switch fieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return first(pod.Status.HostIP, hostIPs(pod.Status.HostIPs)), nil
	case "status.hostIPs":
		return all(pod.Status.HostIP, hostIPs(pod.Status.HostIPs)), nil
	case "status.podIP":
		return first(pod.Status.PodIP, podIPs(pod.Status.PodIPs)), nil
	case "status.podIPs":
		return all(pod.Status.PodIP, podIPs(pod.Status.PodIPs)), nil
	}
	return "", fmt.Errorf("unsupported fieldPath %q", fieldPath)
}

// splitSubscript splits "path['key']" into path and key; ok is false when
// fieldPath has no subscript.
func splitSubscript(fieldPath string) (path, key string, ok bool) {
	s, found := strings.CutSuffix(fieldPath, "']")
	if !found {
		return fieldPath, "", false
	}
	path, key, found = strings.Cut(s, "['")
	if !found || path == "" {
		return fieldPath, "", false
	}
	return path, key, true
}

// formatMap formats m as the downward API does: one k="v" line per key,
// sorted by key, the value quoted as a Go string, no trailing newline.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lines := make([]string, len(keys))
	for i, k := range keys {
		lines[i] = k + "=" + strconv.Quote(m[k])
	}
	return strings.Join(lines, "\n")
}

// hostIPs returns the addresses of ips.
func hostIPs(ips []corev1.HostIP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.IP
	}
	return out
}

// podIPs returns the addresses of ips.
func podIPs(ips []corev1.PodIP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.IP
	}
	return out
}

// first returns the primary address: primary if set, else the first of list.
func first(primary string, list []string) string {
	if primary == "" && len(list) > 0 {
		return list[0]
	}
	return primary
}

// all returns the addresses of list comma-separated, or primary alone when
// list is empty.
func all(primary string, list []string) string {
	if len(list) == 0 {
		return primary
	}
	return strings.Join(list, ",")
}
