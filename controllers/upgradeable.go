package controllers

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-operator/etcd-operator/api/v1alpha1"
)

// Reasons of the operator's Upgradeable condition, the one OLM reads from
// the operator's OperatorCondition before it replaces the operator.
const (
	ReasonNoClusterChanging = "NoClusterChanging"
	ReasonClustersChanging  = "ClustersChanging"
)

// upgradeBlockersShown is how many changing clusters the Upgradeable
// message names; the others are counted.
const upgradeBlockersShown = 5

// changeInFlight says which change the operator is making to cluster c, as
// its status tells: a membership change or a roll (Progressing True, with
// the step as reason), a CA rotation (CATrusted False), a rebuild from a
// survivor (Recovered Unknown), a restore (Restored Unknown). Empty when it
// makes none. A paused cluster has none in flight: the operator takes no
// step on it (Progressing False, reason Paused).
func changeInFlight(c *etcdv1alpha1.EtcdCluster) string {
	conds := c.Status.Conditions
	if p := meta.FindStatusCondition(conds, etcdv1alpha1.ConditionProgressing); p != nil && p.Status == metav1.ConditionTrue {
		if p.Message == "" {
			return p.Reason
		}
		return p.Message // it starts with the step
	}
	if ca := meta.FindStatusCondition(conds, etcdv1alpha1.ConditionCATrusted); ca != nil && ca.Status == metav1.ConditionFalse {
		return "CA rotation: " + ca.Message
	}
	if r := meta.FindStatusCondition(conds, etcdv1alpha1.ConditionRecovered); r != nil && r.Status == metav1.ConditionUnknown {
		return "recovery: " + r.Message
	}
	if r := meta.FindStatusCondition(conds, etcdv1alpha1.ConditionRestored); r != nil && r.Status == metav1.ConditionUnknown {
		return "restore: " + r.Message
	}
	return ""
}

// upgradeable is the operator's Upgradeable condition for the clusters it
// manages: False while it is changing any of them, naming the first few
// (by namespace and name) and the change, True otherwise. OLM holds an
// upgrade of the operator while it is False.
func upgradeable(clusters []etcdv1alpha1.EtcdCluster) metav1.Condition {
	var changing []string
	for i := range clusters {
		if change := changeInFlight(&clusters[i]); change != "" {
			changing = append(changing, clusters[i].Namespace+"/"+clusters[i].Name+" ("+change+")")
		}
	}
	if len(changing) == 0 {
		return metav1.Condition{Type: "Upgradeable", Status: metav1.ConditionTrue, Reason: ReasonNoClusterChanging,
			Message: fmt.Sprintf("No EtcdCluster is changing (%d in all)", len(clusters))}
	}
	sort.Strings(changing)
	shown := changing[:min(len(changing), upgradeBlockersShown)]
	msg := "An upgrade waits for the changes in flight to end: " + strings.Join(shown, "; ")
	if more := len(changing) - len(shown); more > 0 {
		msg += fmt.Sprintf("; and %d more", more)
	}
	return metav1.Condition{Type: "Upgradeable", Status: metav1.ConditionFalse, Reason: ReasonClustersChanging, Message: msg}
}
