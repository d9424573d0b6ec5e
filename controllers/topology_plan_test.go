package controllers

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
	"github.com/etcd-operator/etcd-operator/internal/builder"
	"github.com/etcd-operator/etcd-operator/internal/etcd"
)

// world is a fixture of what a pass observes: members by name (learners
// marked), Pods by name, the leader and who is healthy.
type world struct {
	replicas  int32
	voters    []string
	learners  []string
	unstarted []string // learners etcd knows only by peer URL
	pods      []string
	leader    string
	sick      []string
	noEtcd    bool
	// persistent members have claims; claims lists which exist.
	persistent bool
	claims     []string
	// foreign is a member whose endpoint reports another cluster ID.
	foreign string
	// failed Pods stopped for good; silent members did not answer Status;
	// oldPods were created long ago and are not Ready.
	failed  []string
	silent  []string
	oldPods bool
	// outdated Pods were built from an older spec; runs is the etcd version
	// every member reports and image the spec's etcd image.
	outdated []string
	// seeds are Pods annotated to start as the founder of a new cluster.
	seeds []string
	// unannotated are Pods whose initial-cluster-state annotation a user
	// removed (etcd then defaults to founding a new cluster).
	unannotated []string
	// staleInitial are members' Pods whose --initial-cluster names the
	// members there were when they were created (the others name the
	// member list).
	staleInitial []string
	// untrusting Pods were started with an older trust bundle.
	untrusting []string
	runs       string
	image      string
	// unready Pods have not been Ready for ten minutes (the others are
	// Ready); lost Pods are on a
	// node that is not Ready; deleting Pods are being deleted.
	unready     []string
	notReadyFor time.Duration // ten minutes when 0
	lost        []string
	deleting    []string
	// lostCluster is the cluster ID in the status; startEmpty sets the
	// annotation that accepts an empty cluster in its place.
	lostCluster string
	startEmpty  bool
	// applied is the raft applied index each member's Pod reports; noted
	// is each Pod's learner-progress annotation, as "INDEX@AGO" (AGO a
	// duration before now) or a raw value when it does not parse that way.
	applied map[string]uint64
	noted   map[string]string
	// unhealthyAfter is spec.unhealthyMemberTimeout when set.
	unhealthyAfter time.Duration
	// defragmenting is, for each Pod the operator is defragmenting, how
	// long ago it began.
	defragmenting map[string]time.Duration
}

func (w world) observed() observed {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "uid"}, Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To(w.replicas)}}
	o := observed{cluster: c, pods: map[string]*corev1.Pod{}, healthy: map[uint64]bool{}, claims: map[string]bool{}}
	if w.persistent {
		c.Spec.Storage.VolumeClaimTemplate = &etcdv1alpha1.EmbeddedPersistentVolumeClaim{}
	}
	o.allClaims = map[string]bool{}
	for _, name := range w.claims {
		o.claims[name], o.allClaims[name] = true, true
	}
	if w.image != "" {
		c.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "etcd", Image: w.image}}
	}
	c.Status.ClusterID = w.lostCluster
	if w.unhealthyAfter != 0 {
		c.Spec.UnhealthyMemberTimeout = &metav1.Duration{Duration: w.unhealthyAfter}
	}
	if w.startEmpty {
		c.Annotations = map[string]string{etcdv1alpha1.AnnotationStartEmpty: w.lostCluster}
	}
	o.now = time.Now()
	o.lostNodes, o.versions, o.appliedIndexes = map[string]bool{}, map[string]string{}, map[string]uint64{}
	for _, p := range w.pods {
		if w.runs != "" {
			o.versions[p] = w.runs
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p, CreationTimestamp: metav1.NewTime(o.now)}, Spec: corev1.PodSpec{NodeName: "node-" + p}}
		if w.oldPods {
			pod.CreationTimestamp = metav1.NewTime(o.now.Add(-time.Hour))
		}
		if slices.Contains(w.failed, p) {
			pod.Status.Phase = corev1.PodFailed
		}
		pod.Annotations = map[string]string{etcdv1alpha1.AnnotationPodSpecHash: builder.PodSpecHash(c)}
		if slices.Contains(w.outdated, p) {
			pod.Annotations[etcdv1alpha1.AnnotationPodSpecHash] = "old"
		}
		switch {
		case slices.Contains(w.seeds, p):
			pod.Annotations[etcdv1alpha1.AnnotationInitialClusterState] = builder.ClusterStateNew
		case !slices.Contains(w.unannotated, p):
			pod.Annotations[etcdv1alpha1.AnnotationInitialClusterState] = builder.ClusterStateExisting
		}
		if i, ok := w.applied[p]; ok {
			o.appliedIndexes[p] = i
		}
		if n, ok := w.noted[p]; ok {
			pod.Annotations[etcdv1alpha1.AnnotationLearnerProgress] = n
			if index, ago, ok := strings.Cut(n, "@"); ok {
				if d, err := time.ParseDuration(ago); err == nil {
					pod.Annotations[etcdv1alpha1.AnnotationLearnerProgress] = index + "@" + o.now.Add(-d).UTC().Format(time.RFC3339)
				}
			}
		}
		if ago, ok := w.defragmenting[p]; ok {
			pod.Annotations[etcdv1alpha1.AnnotationDefragmenting] = o.now.Add(-ago).UTC().Format(time.RFC3339)
		}
		if w.untrusting != nil {
			o.trustHash = "bundle"
			pod.Annotations[etcdv1alpha1.AnnotationTrustBundleHash] = "bundle"
			if slices.Contains(w.untrusting, p) {
				pod.Annotations[etcdv1alpha1.AnnotationTrustBundleHash] = "older bundle"
			}
		}
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		if slices.Contains(w.unready, p) {
			d := w.notReadyFor
			if d == 0 {
				d = 10 * time.Minute
			}
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(o.now.Add(-d))}}
		}
		if slices.Contains(w.deleting, p) {
			pod.DeletionTimestamp = ptr.To(metav1.NewTime(o.now))
		}
		o.lostNodes[pod.Spec.NodeName] = slices.Contains(w.lost, p)
		o.pods[p] = pod
	}
	if w.noEtcd {
		o.etcdErr = errors.New("connection refused")
		return o
	}
	o.members = []etcd.Member{}
	id := uint64(0)
	add := func(name string, learner, started bool) {
		id++
		m := etcd.Member{ID: id, PeerURLs: []string{"http://" + name + ".a-headless.ns.svc:2380"}, IsLearner: learner}
		if started {
			m.Name = name
		}
		o.members = append(o.members, m)
		if !learner {
			o.healthy[id] = true
		}
		for _, s := range w.sick {
			if s == name {
				o.healthy[id] = false
			}
		}
		if name == w.leader {
			o.leader = id
		}
	}
	for _, v := range w.voters {
		add(v, false, true)
	}
	for _, l := range w.learners {
		add(l, true, true)
	}
	for _, l := range w.unstarted {
		add(l, true, false)
	}
	for name, p := range o.pods {
		p.Annotations[etcdv1alpha1.AnnotationInitialCluster] = initialCluster(c, o.members)
		if slices.Contains(w.staleInitial, name) {
			p.Annotations[etcdv1alpha1.AnnotationInitialCluster] = "a-0=http://a-0.a-headless.ns.svc:2380,a-1=http://a-1.a-headless.ns.svc:2380,a-2=http://a-2.a-headless.ns.svc:2380"
		}
	}
	o.clusterID, o.clusterIDs = 1, map[string]uint64{}
	for _, v := range w.voters {
		if !slices.Contains(w.silent, v) {
			o.clusterIDs["http://"+v+".a-headless.ns.svc:2379"] = 1
		}
	}
	if w.foreign != "" {
		o.clusterIDs["http://"+w.foreign+".a-headless.ns.svc:2379"] = 2
	}
	return o
}

func TestPlan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		world  world
		want   actionKind
		member string
	}{
		{"nothing yet: found the cluster", world{replicas: 3, noEtcd: true}, actCreateSeed, "a-0"},
		{"founders start together: the next one", world{replicas: 3, noEtcd: true, pods: []string{"a-0"}, seeds: []string{"a-0"}}, actCreateSeed, "a-1"},
		{"every founder started: wait for them to form", world{replicas: 3, noEtcd: true, pods: []string{"a-0", "a-1", "a-2"}, seeds: []string{"a-0", "a-1", "a-2"}}, actWait, ""},
		{"a founder's Pod refused, the others formed: it starts as a member", world{replicas: 3, voters: []string{"a-0", "a-1"}, unstarted: []string{"a-2"}, pods: []string{"a-0", "a-1"}, seeds: []string{"a-0", "a-1"}, leader: "a-0"}, actSealSeed, "a-0"},
		{"a founder's Pod refused, the others sealed: it starts as a member", world{replicas: 3, voters: []string{"a-0", "a-1"}, unstarted: []string{"a-2"}, pods: []string{"a-0", "a-1"}, leader: "a-0"}, actCreatePod, "a-2"},
		{"one of three: add a learner", world{replicas: 3, voters: []string{"a-0"}, pods: []string{"a-0"}, leader: "a-0"}, actAddLearner, "a-1"},
		{"learner added, no Pod (crash after add)", world{replicas: 3, voters: []string{"a-0"}, unstarted: []string{"a-1"}, pods: []string{"a-0"}, leader: "a-0"}, actCreatePod, "a-1"},
		{"learner started: promote", world{replicas: 3, voters: []string{"a-0"}, learners: []string{"a-1"}, pods: []string{"a-0", "a-1"}, leader: "a-0"}, actPromote, "a-1"},
		{"unstarted learner with a Pod: promote when etcd accepts", world{replicas: 3, voters: []string{"a-0"}, unstarted: []string{"a-1"}, pods: []string{"a-0", "a-1"}, leader: "a-0"}, actPromote, "a-1"},
		{"the cluster formed: its seed is sealed", world{replicas: 3, voters: []string{"a-0"}, pods: []string{"a-0"}, seeds: []string{"a-0"}, leader: "a-0"}, actSealSeed, "a-0"},
		{"a member whose annotation a user removed is sealed again", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, unannotated: []string{"a-1"}, leader: "a-0"}, actSealSeed, "a-1"},
		{"a roll replaced the members a Pod was created with: it is told the members there are", world{replicas: 3, voters: []string{"a-3", "a-4", "a-5"}, pods: []string{"a-3", "a-4", "a-5"}, staleInitial: []string{"a-4", "a-5"}, leader: "a-3"}, actSetPeers, "a-4"},
		{"a founder still to found the cluster keeps the founders", world{replicas: 3, voters: []string{"a-1"}, unstarted: []string{"a-0"}, pods: []string{"a-0", "a-1"}, seeds: []string{"a-0"}, staleInitial: []string{"a-0"}, leader: "a-1"}, actPromote, "a-0"},
		{"a seed that has not started is not sealed", world{replicas: 3, unstarted: []string{"a-0"}, voters: []string{"a-1"}, pods: []string{"a-0", "a-1"}, seeds: []string{"a-0"}, leader: "a-1"}, actPromote, "a-0"},
		{"names are never reused", world{replicas: 3, voters: []string{"a-0", "a-4"}, pods: []string{"a-0", "a-4"}, leader: "a-0"}, actAddLearner, "a-5"},
		{"at strength", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0"}, actNone, ""},
		{"scale down: the newest goes", world{replicas: 1, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0"}, actRemove, "a-2"},
		{"scale down: a sick member goes first", world{replicas: 2, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", sick: []string{"a-1"}}, actRemove, "a-1"},
		{"two members, one sick: no quorum to commit a removal", world{replicas: 1, voters: []string{"a-0", "a-1"}, pods: []string{"a-0", "a-1"}, leader: "a-1", sick: []string{"a-0"}}, actBlocked, "a-0"},
		{"scale down while a member's Pod terminates: that member goes", world{replicas: 2, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", deleting: []string{"a-1"}}, actRemove, "a-1"},
		{"a member whose Pod terminates is no quorum to count on", world{replicas: 1, voters: []string{"a-0", "a-1"}, pods: []string{"a-0", "a-1"}, leader: "a-0", deleting: []string{"a-1"}}, actBlocked, "a-1"},
		{"scale down keeps the leader", world{replicas: 1, voters: []string{"a-0", "a-1"}, pods: []string{"a-0", "a-1"}, leader: "a-1"}, actRemove, "a-0"},
		{"a sick leader leaves after moving leadership", world{replicas: 2, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-1", sick: []string{"a-1"}}, actMoveLeader, "a-1"},
		{"removed member's Pod (crash after remove)", world{replicas: 1, voters: []string{"a-0"}, pods: []string{"a-0", "a-1"}, leader: "a-0"}, actDeletePod, "a-1"},
		{"members of two clusters: stop and say so", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", foreign: "a-2"}, actRefuse, etcdv1alpha1.ReasonClusterIDMismatch},
		{"emptyDir member whose Pod was deleted: replace it", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-2"}, leader: "a-0", sick: []string{"a-1"}}, actRemove, "a-1"},
		{"a member that answers without a Pod in view: wait", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-2"}, leader: "a-0"}, actWait, ""},
		{"replacing would cost quorum: blocked", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-2"}, leader: "a-0", sick: []string{"a-1", "a-2"}}, actBlocked, "a-1"},
		{"a Pod that stopped for good goes", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, failed: []string{"a-2"}, leader: "a-0"}, actDeletePod, "a-2"},
		{"a learner no longer needed is removed", world{replicas: 1, voters: []string{"a-0"}, learners: []string{"a-1"}, pods: []string{"a-0", "a-1"}, leader: "a-0"}, actRemove, "a-1"},
		{"a learner whose Pod never got Ready is removed", world{replicas: 3, voters: []string{"a-0"}, learners: []string{"a-1"}, pods: []string{"a-0", "a-1"}, leader: "a-0", oldPods: true, unready: []string{"a-1"}}, actRemove, "a-1"},
		// A learner's Pod is never Ready (etcd's /readyz fails on a
		// learner): it is judged by its raft applied index.
		{"a learner older than 5 minutes whose index advances is kept: its progress is noted", world{replicas: 3, voters: []string{"a-0"}, learners: []string{"a-1"}, pods: []string{"a-0", "a-1"}, leader: "a-0",
			oldPods: true, unready: []string{"a-1"}, applied: map[string]uint64{"a-1": 500}}, actNoteIndex, "a-1"},
		{"a learner that advanced past its note long ago is kept: its progress is noted", world{replicas: 3, voters: []string{"a-0"}, learners: []string{"a-1"}, pods: []string{"a-0", "a-1"}, leader: "a-0",
			oldPods: true, unready: []string{"a-1"}, applied: map[string]uint64{"a-1": 500}, noted: map[string]string{"a-1": "400@20m"}}, actNoteIndex, "a-1"},
		{"a learner that advanced since a recent note waits to be promoted", world{replicas: 3, voters: []string{"a-0"}, learners: []string{"a-1"}, pods: []string{"a-0", "a-1"}, leader: "a-0",
			oldPods: true, unready: []string{"a-1"}, applied: map[string]uint64{"a-1": 500}, noted: map[string]string{"a-1": "400@10s"}}, actPromote, "a-1"},
		{"a learner that moved 4 minutes ago waits to be promoted", world{replicas: 3, voters: []string{"a-0"}, learners: []string{"a-1"}, pods: []string{"a-0", "a-1"}, leader: "a-0",
			oldPods: true, unready: []string{"a-1"}, applied: map[string]uint64{"a-1": 400}, noted: map[string]string{"a-1": "400@4m"}}, actPromote, "a-1"},
		{"a learner stuck for 6 minutes is removed", world{replicas: 3, voters: []string{"a-0"}, learners: []string{"a-1"}, pods: []string{"a-0", "a-1"}, leader: "a-0",
			oldPods: true, unready: []string{"a-1"}, applied: map[string]uint64{"a-1": 400}, noted: map[string]string{"a-1": "400@6m"}}, actRemove, "a-1"},
		{"a learner that stopped answering after its last advance is removed", world{replicas: 3, voters: []string{"a-0"}, learners: []string{"a-1"}, pods: []string{"a-0", "a-1"}, leader: "a-0",
			oldPods: true, unready: []string{"a-1"}, noted: map[string]string{"a-1": "400@6m"}}, actRemove, "a-1"},
		{"a learner whose index went back (its data wiped) makes no progress", world{replicas: 3, voters: []string{"a-0"}, learners: []string{"a-1"}, pods: []string{"a-0", "a-1"}, leader: "a-0",
			oldPods: true, unready: []string{"a-1"}, applied: map[string]uint64{"a-1": 3}, noted: map[string]string{"a-1": "400@6m"}}, actRemove, "a-1"},
		{"a stuck learner has spec.unhealthyMemberTimeout when longer", world{replicas: 3, voters: []string{"a-0"}, learners: []string{"a-1"}, pods: []string{"a-0", "a-1"}, leader: "a-0", unhealthyAfter: 10 * time.Minute,
			oldPods: true, unready: []string{"a-1"}, applied: map[string]uint64{"a-1": 400}, noted: map[string]string{"a-1": "400@6m"}}, actPromote, "a-1"},
		{"a short spec.unhealthyMemberTimeout does not cut a learner's 5 minutes", world{replicas: 3, voters: []string{"a-0"}, learners: []string{"a-1"}, pods: []string{"a-0", "a-1"}, leader: "a-0", unhealthyAfter: 10 * time.Second,
			oldPods: true, unready: []string{"a-1"}, applied: map[string]uint64{"a-1": 400}, noted: map[string]string{"a-1": "400@4m"}}, actPromote, "a-1"},
		{"a note that does not parse counts from the Pod's creation", world{replicas: 3, voters: []string{"a-0"}, learners: []string{"a-1"}, pods: []string{"a-0", "a-1"}, leader: "a-0",
			oldPods: true, unready: []string{"a-1"}, noted: map[string]string{"a-1": "garbage"}}, actRemove, "a-1"},
		{"a voter's old progress note does not remove it", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0",
			oldPods: true, applied: map[string]uint64{"a-1": 400}, noted: map[string]string{"a-1": "400@1h"}}, actNone, ""},
		{"a new voter with a progress note, not Ready yet, is not removed", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0",
			oldPods: true, unready: []string{"a-2"}, notReadyFor: time.Hour, applied: map[string]uint64{"a-2": 400}, noted: map[string]string{"a-2": "400@1h"}}, actNone, ""},
		{"two of five lost with their nodes, one replaced: its Pod goes", world{replicas: 5, voters: []string{"a-0", "a-1", "a-2", "a-4"}, pods: []string{"a-0", "a-1", "a-2", "a-3", "a-4"}, leader: "a-0",
			lost: []string{"a-3", "a-4"}, sick: []string{"a-4"}, silent: []string{"a-4"}, unready: []string{"a-3", "a-4"}}, actDeletePod, "a-3"},
		{"two of five silent, one replaced: the other is replaced too", world{replicas: 5, voters: []string{"a-0", "a-1", "a-2", "a-4"}, pods: []string{"a-0", "a-1", "a-2", "a-3", "a-4"}, leader: "a-0",
			sick: []string{"a-4"}, silent: []string{"a-4"}, unready: []string{"a-3", "a-4"}}, actRemove, "a-4"},
		{"a stray Pod waits until every member confirmed the list", world{replicas: 1, voters: []string{"a-0", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", silent: []string{"a-2"}}, actWait, "a-1"},
		{"no answer, claims without Pods: bring them back", world{replicas: 3, noEtcd: true, persistent: true, claims: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0"}, lostCluster: "1"}, actCreatePod, "a-1"},
		{"never formed, founders' claims without Pods: found the cluster", world{replicas: 3, noEtcd: true, persistent: true, claims: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0"}, seeds: []string{"a-0"}}, actCreateSeed, "a-1"},
		{"seed's claim, its Pod refused, never formed: found the cluster", world{replicas: 3, noEtcd: true, persistent: true, claims: []string{"a-0"}}, actCreateSeed, "a-0"},
		{"seed's claim without a Pod after the cluster formed: bring it back", world{replicas: 1, noEtcd: true, persistent: true, claims: []string{"a-0"}, lostCluster: "1"}, actCreatePod, "a-0"},
		{"claim member whose Pod was deleted: recreate it", world{replicas: 3, persistent: true, claims: []string{"a-0", "a-1", "a-2"}, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-2"}, leader: "a-0"}, actCreatePod, "a-1"},
		{"a member unhealthy past the timeout is replaced", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", sick: []string{"a-1"}, unready: []string{"a-1"}}, actRemove, "a-1"},
		{"a Pod not Ready whose member answers stays", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", unready: []string{"a-1"}}, actNone, ""},
		{"a member unhealthy past the timeout while defragmenting is left to finish", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", sick: []string{"a-1"}, unready: []string{"a-1"}, unhealthyAfter: time.Second,
			defragmenting: map[string]time.Duration{"a-1": 3 * time.Minute}}, actNone, ""},
		{"a member defragmenting for longer than the budget is replaced", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", sick: []string{"a-1"}, unready: []string{"a-1"},
			defragmenting: map[string]time.Duration{"a-1": 4 * time.Minute}}, actRemove, "a-1"},
		{"a member unhealthy within the timeout: wait for it", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", sick: []string{"a-1"}, oldPods: true, notReadyFor: time.Minute, unready: []string{"a-1"}}, actWait, "a-1"},
		{"replacing an unhealthy member would cost quorum: blocked", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", sick: []string{"a-1", "a-2"}, unready: []string{"a-1", "a-2"}}, actBlocked, "a-1"},
		{"a removed member's Pod on a lost node is deleted at once", world{replicas: 3, voters: []string{"a-0", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", lost: []string{"a-1"}, deleting: []string{"a-1"}}, actDeletePod, "a-1"},
		{"a removed member's Pod being deleted on a live node: its kubelet finishes", world{replicas: 3, voters: []string{"a-0", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", deleting: []string{"a-1"}}, actAddLearner, "a-3"},
		{"every member and its data gone: refuse to start empty", world{replicas: 3, noEtcd: true, lostCluster: "1"}, actRefuse, etcdv1alpha1.ReasonDataLost},
		{"every member gone, start-empty annotation: found anew", world{replicas: 3, noEtcd: true, lostCluster: "1", startEmpty: true}, actCreateSeed, "a-0"},
		{"founding anew: the next founder", world{replicas: 3, noEtcd: true, lostCluster: "1", startEmpty: true, pods: []string{"a-0"}, seeds: []string{"a-0"}}, actCreateSeed, "a-1"},
		{"start-empty beside a Pod of the lost cluster: no founding", world{replicas: 3, noEtcd: true, lostCluster: "1", startEmpty: true, pods: []string{"a-4"}}, actWait, ""},
		{"roll in place: a follower first", world{replicas: 3, persistent: true, claims: []string{"a-0", "a-1", "a-2"}, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", outdated: []string{"a-0", "a-1", "a-2"}}, actRoll, "a-1"},
		{"roll in place: the leader last, after moving leadership", world{replicas: 3, persistent: true, claims: []string{"a-0", "a-1", "a-2"}, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", outdated: []string{"a-0"}}, actMoveLeader, "a-0"},
		{"roll: waits for every member to be healthy", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", outdated: []string{"a-1"}, sick: []string{"a-2"}}, actWait, "a-2"},
		{"roll: waits for every Pod to be Ready", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", outdated: []string{"a-1"}, unready: []string{"a-2"}, notReadyFor: time.Second}, actWait, "a-2"},
		{"roll: membership first", world{replicas: 3, voters: []string{"a-0", "a-1"}, pods: []string{"a-0", "a-1"}, leader: "a-0", outdated: []string{"a-1"}}, actAddLearner, "a-2"},
		{"roll: waits for the rolled Pod to be gone", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", outdated: []string{"a-0", "a-2"}, deleting: []string{"a-1"}}, actWait, "a-1"},
		{"roll in place: a member started with an older trust bundle", world{replicas: 3, persistent: true, claims: []string{"a-0", "a-1", "a-2"}, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", untrusting: []string{"a-2"}}, actRoll, "a-2"},
		{"roll: nothing when every member trusts the bundle", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", untrusting: []string{}}, actNone, ""},
		{"roll: a lone emptyDir member surges", world{replicas: 1, voters: []string{"a-0"}, pods: []string{"a-0"}, leader: "a-0", outdated: []string{"a-0"}}, actAddLearner, "a-1"},
		{"roll: a lone member with a claim surges", world{replicas: 1, voters: []string{"a-0"}, pods: []string{"a-0"}, claims: []string{"a-0"}, persistent: true, leader: "a-0", outdated: []string{"a-0"}}, actAddLearner, "a-1"},
		{"roll: two members with claims surge", world{replicas: 2, voters: []string{"a-0", "a-1"}, pods: []string{"a-0", "a-1"}, claims: []string{"a-0", "a-1"}, persistent: true, leader: "a-0", outdated: []string{"a-1"}}, actAddLearner, "a-2"},
		{"roll: emptyDir members surge", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", outdated: []string{"a-0", "a-1", "a-2"}}, actAddLearner, "a-3"},
		{"surge: the new member's learner is promoted", world{replicas: 2, voters: []string{"a-0", "a-1"}, learners: []string{"a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", outdated: []string{"a-0", "a-1"}}, actPromote, "a-2"},
		{"surge: a learner is not needed once no voter is outdated", world{replicas: 2, voters: []string{"a-0", "a-1"}, learners: []string{"a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0"}, actRemove, "a-2"},
		{"surge: an outdated follower leaves first", world{replicas: 2, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", outdated: []string{"a-0", "a-1"}}, actRemove, "a-1"},
		{"surge: the new voter that does not answer yet is starting, not the sick member that goes first", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2", "a-3"}, pods: []string{"a-0", "a-1", "a-2", "a-3"}, leader: "a-0", outdated: []string{"a-0", "a-1", "a-2"}, sick: []string{"a-3"}, unready: []string{"a-3"}, notReadyFor: time.Second}, actWait, "a-3"},
		{"surge: a sick outdated voter leaves first", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2", "a-3"}, pods: []string{"a-0", "a-1", "a-2", "a-3"}, leader: "a-0", outdated: []string{"a-0", "a-1", "a-2"}, sick: []string{"a-1"}}, actRemove, "a-1"},
		{"surge: removal waits for the new member's Pod to be Ready", world{replicas: 2, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", outdated: []string{"a-0", "a-1"}, unready: []string{"a-2"}, notReadyFor: time.Second}, actWait, "a-2"},
		{"surge: an outdated leader hands over, then leaves", world{replicas: 2, voters: []string{"a-0", "a-2", "a-3"}, pods: []string{"a-0", "a-2", "a-3"}, leader: "a-0", outdated: []string{"a-0"}}, actMoveLeader, "a-0"},
		{"scale down: an outdated member goes before a newer one", world{replicas: 2, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, claims: []string{"a-0", "a-1", "a-2"}, persistent: true, leader: "a-0", outdated: []string{"a-1"}}, actRemove, "a-1"},
		{"upgrade 3.5 -> 3.6", world{replicas: 3, persistent: true, claims: []string{"a-0", "a-1", "a-2"}, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", outdated: []string{"a-1"}, runs: "3.5.21", image: "quay.io/coreos/etcd:v3.6.16"}, actRoll, "a-1"},
		{"upgrade 3.5 -> 3.7 refused", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", outdated: []string{"a-1"}, runs: "3.5.21", image: "quay.io/coreos/etcd:v3.7.0"}, actRefuse, etcdv1alpha1.ReasonUpgradeRefused},
		{"downgrade refused, scale-up too", world{replicas: 5, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", runs: "3.6.16", image: "quay.io/coreos/etcd:v3.5.21"}, actRefuse, etcdv1alpha1.ReasonUpgradeRefused},
		{"claim member whose Pod and claim were deleted: replace it", world{replicas: 3, persistent: true, claims: []string{"a-0", "a-2"}, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-2"}, leader: "a-0", sick: []string{"a-1"}}, actRemove, "a-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := plan(tt.world.observed())
			subject := got.member
			if got.kind == actRefuse {
				subject = got.refusal
			}
			if got.kind != tt.want || subject != tt.member {
				t.Errorf("plan() = %s, want %s %s", got, tt.want, tt.member)
			}
		})
	}
}

// TestPlanSaysWhy checks that what a user reads names what to look at.
func TestPlanSaysWhy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		world world
		want  []string
	}{
		{"cluster IDs", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", foreign: "a-2"},
			[]string{"http://a-2.a-headless.ns.svc:2379 reports cluster 2, not 1"}},
		{"data lost", world{replicas: 3, noEtcd: true, lostCluster: "1a2b"},
			[]string{"etcd cluster 1a2b is gone", etcdv1alpha1.AnnotationStartEmpty + "=1a2b"}},
		{"unhealthy", world{replicas: 3, voters: []string{"a-0", "a-1", "a-2"}, pods: []string{"a-0", "a-1", "a-2"}, leader: "a-0", sick: []string{"a-1"}, unready: []string{"a-1"}},
			[]string{"member a-1 has been unhealthy since", "spec.unhealthyMemberTimeout (5m0s)"}},
		{"stuck learner", world{replicas: 3, voters: []string{"a-0"}, learners: []string{"a-1"}, pods: []string{"a-0", "a-1"}, leader: "a-0", oldPods: true, unready: []string{"a-1"}, applied: map[string]uint64{"a-1": 400}, noted: map[string]string{"a-1": "400@6m"}},
			[]string{"learner a-1 has made no progress since", "(raft applied index 400), longer than 5m0s"}},
		{"catching up", world{replicas: 3, voters: []string{"a-0"}, learners: []string{"a-1"}, pods: []string{"a-0", "a-1"}, leader: "a-0", oldPods: true, unready: []string{"a-1"}, applied: map[string]uint64{"a-1": 500}, noted: map[string]string{"a-1": "400@1m"}},
			[]string{"learner a-1 is catching up: raft applied index 500, up from 400"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := plan(tt.world.observed())
			for _, w := range tt.want {
				if !strings.Contains(got.reason, w) {
					t.Errorf("reason %q does not say %q", got.reason, w)
				}
			}
		})
	}
}

// TestPlanConverges walks a cluster from nothing to 3 members (its
// founders, together), then to 1, then to 3 again (a learner at a time),
// applying each planned step to the fixture as a perfect world would, and
// checks the steps in order.
func TestPlanConverges(t *testing.T) {
	t.Parallel()
	w := world{replicas: 3, noEtcd: true}
	var steps []string
	apply := func(a action) {
		switch a.kind {
		case actCreateSeed:
			// The founders form the cluster once they all run.
			w.pods, w.seeds = append(w.pods, a.member), append(w.seeds, a.member)
			if len(w.pods) == int(w.replicas) {
				w.noEtcd, w.voters, w.leader = false, slices.Clone(w.pods), w.pods[0]
			}
		case actSealSeed:
			w.seeds = without(w.seeds, a.member)
		case actAddLearner:
			w.unstarted = append(w.unstarted, a.member)
		case actCreatePod:
			w.pods = append(w.pods, a.member)
		case actPromote:
			w.voters, w.unstarted = append(w.voters, a.member), nil
		case actRemove:
			w.voters = without(w.voters, a.member)
		case actDeletePod:
			w.pods = without(w.pods, a.member)
		}
	}
	for i := 0; i < 22; i++ {
		switch i {
		case 8:
			w.replicas = 1
		case 14:
			w.replicas = 3
		}
		a := plan(w.observed())
		steps = append(steps, string(a.kind)+" "+a.member)
		apply(a)
	}
	want := []string{
		"CreateSeed a-0", "CreateSeed a-1", "CreateSeed a-2",
		"SealSeed a-0", "SealSeed a-1", "SealSeed a-2", "None ", "None ",
		"RemoveMember a-2", "DeletePod a-2", "RemoveMember a-1", "DeletePod a-1", "None ", "None ",
		"AddLearner a-1", "CreatePod a-1", "Promote a-1",
		"AddLearner a-2", "CreatePod a-2", "Promote a-2", "None ",
	}
	for i, s := range want {
		if steps[i] != s {
			t.Fatalf("step %d = %q, want %q; steps: %v", i, steps[i], s, steps[:len(want)])
		}
	}
}

func without(list []string, item string) []string {
	var out []string
	for _, s := range list {
		if s != item {
			out = append(out, s)
		}
	}
	return out
}

// TestRollKeepsQuorum rolls clusters of 1 to 5 members, on emptyDir and on
// claims, to a new spec, applying each planned step as a perfect world
// would, and checks after every step that the voters whose Pods run are a
// quorum of the voters: no roll may cost the cluster its quorum.
func TestRollKeepsQuorum(t *testing.T) {
	t.Parallel()
	for n := 1; n <= 5; n++ {
		for _, persistent := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d members, claims %v", n, persistent), func(t *testing.T) {
				t.Parallel()
				steps, err := simulateRoll(n, persistent)
				if err != nil {
					t.Fatalf("%v; steps: %v", err, steps)
				}
			})
		}
	}
}

// simulateRoll rolls a cluster of n members whose Pods are all outdated
// and returns the steps it took, or the step that broke the quorum.
func simulateRoll(n int, persistent bool) ([]string, error) {
	w := world{replicas: int32(n), persistent: persistent, leader: "a-0"}
	for i := range n {
		name := fmt.Sprintf("a-%d", i)
		w.voters, w.pods, w.outdated = append(w.voters, name), append(w.pods, name), append(w.outdated, name)
		if persistent {
			w.claims = append(w.claims, name)
		}
	}
	var steps []string
	for range 20 * n {
		o := w.observed()
		a := plan(o)
		steps = append(steps, a.String())
		switch a.kind {
		case actNone:
			if len(w.outdated) > 0 || len(w.voters) != n {
				return steps, fmt.Errorf("stable with voters %v and outdated Pods %v", w.voters, w.outdated)
			}
			return steps, nil
		case actAddLearner:
			w.unstarted = append(w.unstarted, a.member)
		case actCreatePod:
			w.pods, w.sick = append(w.pods, a.member), without(w.sick, a.member)
			if persistent && !slices.Contains(w.claims, a.member) {
				w.claims = append(w.claims, a.member)
			}
		case actPromote:
			w.voters, w.unstarted = append(w.voters, a.member), without(w.unstarted, a.member)
		case actRemove:
			if a.member == w.leader {
				return steps, fmt.Errorf("removed the leader %s without moving its leadership", a.member)
			}
			w.voters, w.unstarted = without(w.voters, a.member), without(w.unstarted, a.member)
		case actDeletePod:
			w.pods, w.claims, w.outdated = without(w.pods, a.member), without(w.claims, a.member), without(w.outdated, a.member)
		case actRoll:
			w.pods, w.outdated, w.sick = without(w.pods, a.member), without(w.outdated, a.member), append(w.sick, a.member)
		case actMoveLeader:
			to, ok := leaderSuccessor(o, a.id)
			if !ok {
				return steps, fmt.Errorf("no member to move leadership to")
			}
			w.leader = to.Name
		default:
			return steps, fmt.Errorf("unexpected step %s", a)
		}
		up := 0
		for _, v := range w.voters {
			if slices.Contains(w.pods, v) {
				up++
			}
		}
		if up < etcdv1alpha1.Quorum(len(w.voters)) {
			return steps, fmt.Errorf("after %s only %d of %d voters run, below the quorum of %d", a, up, len(w.voters), etcdv1alpha1.Quorum(len(w.voters)))
		}
	}
	return steps, fmt.Errorf("no end after %d steps", len(steps))
}

// TestCertificatesWait checks that, on a TLS cluster whose certificates
// are not ready, no step starts that ends in creating a member's Pod: a
// member rolled in place would stay down, a member added would wait
// without one. Other steps go on; with the certificates ready, all do.
func TestCertificatesWait(t *testing.T) {
	t.Parallel()
	tlsCluster := func(ready metav1.ConditionStatus) observed {
		c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Generation: 2}, Spec: etcdv1alpha1.EtcdClusterSpec{Security: &etcdv1alpha1.SecuritySpec{
			TLS: &etcdv1alpha1.TLSSpec{CertManager: &etcdv1alpha1.CertManagerSpec{}},
		}}}
		c.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionCertificatesReady, Status: ready, ObservedGeneration: 2, Message: "Certificate a-server-tls is not issued yet"}}
		return observed{cluster: c, trustHash: "bundle"}
	}
	for _, kind := range []actionKind{actCreateSeed, actCreatePod, actAddLearner, actRoll, actRemove, actMoveLeader, actPromote, actDeletePod} {
		waits := kind == actCreateSeed || kind == actCreatePod || kind == actAddLearner || kind == actRoll
		got := certificatesWait(tlsCluster(metav1.ConditionFalse), action{kind: kind, member: "a-1"})
		if (got.kind == actWait) != waits {
			t.Errorf("%s with the certificates not ready: %s (%s), want a wait: %v", kind, got.kind, got.reason, waits)
		}
		if waits && !strings.Contains(got.reason, "Certificate a-server-tls is not issued yet") {
			t.Errorf("%s waits without saying why: %s", kind, got.reason)
		}
		if got := certificatesWait(tlsCluster(metav1.ConditionTrue), action{kind: kind, member: "a-1"}); got.kind != kind {
			t.Errorf("%s with the certificates ready: %s", kind, got.kind)
		}
	}
}

// TestLearnerJudgedByProgress walks a learner through passes 2 s apart,
// keeping nothing between passes but what a pass writes to its Pod (the
// progress note), as a restarted operator would. A learner that catches
// up for 20 minutes, advancing a little every 10 s, is never removed and
// noted at most every learnerNoteInterval; one that stops advancing is
// removed once it has made no progress for learnerStallTimeout.
func TestLearnerJudgedByProgress(t *testing.T) {
	t.Parallel()
	walk := func(stallAt time.Duration) (removedAt time.Duration, notes int) {
		w := world{replicas: 3, voters: []string{"a-0"}, learners: []string{"a-1"}, pods: []string{"a-0", "a-1"}, leader: "a-0", unready: []string{"a-1"}}
		base := w.observed()
		created := base.now
		annotations := map[string]string{}
		for at := time.Duration(0); at <= 20*time.Minute; at += 2 * time.Second {
			o := w.observed()
			o.now = created.Add(at)
			pod := o.pods["a-1"]
			pod.CreationTimestamp = metav1.NewTime(created)
			for k, v := range annotations {
				pod.Annotations[k] = v
			}
			// The learner applies 100 entries every 10 s until it stalls.
			progressFor := min(at, stallAt)
			o.appliedIndexes["a-1"] = uint64(progressFor/(10*time.Second)) * 100
			a := plan(o)
			switch a.kind {
			case actRemove:
				if a.member != "a-1" {
					t.Fatalf("at %s: %s, a voter", at, a)
				}
				return at, notes
			case actNoteIndex:
				annotations[etcdv1alpha1.AnnotationLearnerProgress] = a.progress.String()
				notes++
			case actPromote:
			default:
				t.Fatalf("at %s: unexpected step %s", at, a)
			}
		}
		return -1, notes
	}
	if removedAt, notes := walk(time.Hour); removedAt >= 0 || notes > int(20*time.Minute/learnerNoteInterval)+1 {
		t.Errorf("a learner catching up for 20 minutes: removed at %s (want never), %d notes (want at most one per %s)", removedAt, notes, learnerNoteInterval)
	}
	removedAt, _ := walk(7 * time.Minute)
	if removedAt < 7*time.Minute+learnerStallTimeout || removedAt > 7*time.Minute+learnerStallTimeout+learnerNoteInterval+10*time.Second {
		t.Errorf("a learner that stalls at 7m was removed at %s, want about %s later", removedAt, learnerStallTimeout)
	}
}

// TestFoundersStayWhileFounding: spec.replicas changed while the founders
// start does not change who founds the cluster. Founders built for
// another --initial-cluster would compute another cluster ID and never
// join the others.
func TestFoundersStayWhileFounding(t *testing.T) {
	t.Parallel()
	w := world{replicas: 3, noEtcd: true}
	o := w.observed()
	first := plan(o)
	if first.kind != actCreateSeed || first.member != "a-0" || !slices.Equal(first.founders, []string{"a-0", "a-1", "a-2"}) {
		t.Fatalf("first step %s %s of founders %v, want CreateSeed a-0 of a-0, a-1 and a-2", first.kind, first.member, first.founders)
	}
	o.pods["a-0"] = builder.MemberPod(o.cluster, builder.Member{Name: "a-0", ClusterState: builder.ClusterStateNew, InitialCluster: first.initialCluster})
	o.cluster.Spec.Replicas = ptr.To[int32](5)
	for _, want := range []string{"a-1", "a-2"} {
		a := plan(o)
		if a.kind != actCreateSeed || a.member != want || a.initialCluster != first.initialCluster {
			t.Fatalf("step %s %s with --initial-cluster=%s, want CreateSeed %s with %s", a.kind, a.member, a.initialCluster, want, first.initialCluster)
		}
		o.pods[want] = builder.MemberPod(o.cluster, builder.Member{Name: want, ClusterState: builder.ClusterStateNew, InitialCluster: a.initialCluster})
	}
	if a := plan(o); a.kind != actWait {
		t.Errorf("every founder has a Pod: %s %s, want a wait", a.kind, a.member)
	}
}

// TestPlanRestore: a cluster created from a backup is founded by its seed
// alone, which restores; a missing or unfinished backup creates nothing
// and says why.
func TestPlanRestore(t *testing.T) {
	restoring := func(w world, b *etcdv1alpha1.EtcdBackup, problem *restoreRefusal) observed {
		o := w.observed()
		o.cluster.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{Restore: &etcdv1alpha1.RestoreSource{BackupName: "nightly"}}
		o.restore, o.restoreProblem = b, problem
		return o
	}
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "nightly"}, Status: etcdv1alpha1.EtcdBackupStatus{Phase: etcdv1alpha1.BackupSucceeded, Key: "k", SHA256: "s"}}

	a := plan(restoring(world{replicas: 3, noEtcd: true}, b, nil))
	if a.kind != actCreateSeed || a.member != "a-0" || !slices.Equal(a.founders, []string{"a-0"}) || a.restore != b || a.initialCluster != "a-0="+builder.PeerURL(&etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}}, "a-0") {
		t.Fatalf("plan = %+v; want the seed a-0 alone, restoring", a)
	}
	// Its Pod exists and restores: nothing more until it has formed.
	if a := plan(restoring(world{replicas: 3, noEtcd: true, pods: []string{"a-0"}, seeds: []string{"a-0"}}, b, nil)); a.kind != actWait {
		t.Errorf("while the seed restores: %+v, want a wait", a)
	}
	// Formed: the others join as learners.
	if a := plan(restoring(world{replicas: 3, voters: []string{"a-0"}, pods: []string{"a-0"}, leader: "a-0", lostCluster: "1"}, nil, nil)); a.kind != actAddLearner {
		t.Errorf("once formed: %+v, want a learner", a)
	}
	for _, problem := range []restoreRefusal{{etcdv1alpha1.ReasonSourceNotFound, "spec.bootstrap.restore.backupName: EtcdBackup nightly not found"}, {etcdv1alpha1.ReasonSourceNotReady, "spec.bootstrap.restore.backupName: EtcdBackup nightly is Running"}} {
		a := plan(restoring(world{replicas: 3, noEtcd: true}, nil, &problem))
		if a.kind != actRefuse || a.refusal != problem.reason || a.reason != problem.message {
			t.Errorf("%s: plan = %+v, want a refusal", problem.reason, a)
		}
		cond, ok := restoredCondition(restoring(world{replicas: 3, noEtcd: true}, nil, &problem))
		if !ok || cond.Status != metav1.ConditionFalse || cond.Reason != problem.reason {
			t.Errorf("%s: Restored = %+v", problem.reason, cond)
		}
	}
}
