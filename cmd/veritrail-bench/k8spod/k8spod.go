// Package k8spod builds the items of a K8S snapshot report as the Kosli CLI sends them (`kosli
// snapshot k8s`: one per pod), for the measurements that report snapshots.
package k8spod

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Pod is one item of a K8S report (the CLI's PodData).
type Pod struct {
	PodName           string            `json:"podName"`
	Namespace         string            `json:"namespace"`
	Digests           map[string]string `json:"digests"`
	CreationTimestamp int64             `json:"creationTimestamp"`
	Owners            []Owner           `json:"owners"`
}

// Owner is a Kubernetes OwnerReference, as the CLI copies it from the pod's metadata.
type Owner struct {
	APIVersion         string `json:"apiVersion"`
	Kind               string `json:"kind"`
	Name               string `json:"name"`
	UID                string `json:"uid"`
	Controller         bool   `json:"controller"`
	BlockOwnerDeletion bool   `json:"blockOwnerDeletion"`
}

// OfReplicaSet is replica of replicaSet, running images (name -> sha256), with fields derived
// from its arguments alone: the same arguments always make the same pod.
func OfReplicaSet(replicaSet, namespace string, replica int, images map[string]string, created int64) Pod {
	uid := Hash("uid", replicaSet)
	return Pod{
		PodName: replicaSet + "-" + Hash("pod", replicaSet, replica)[:5], Namespace: namespace, Digests: images,
		CreationTimestamp: created,
		Owners: []Owner{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: replicaSet,
			UID: uid[:8] + "-" + uid[8:12] + "-" + uid[12:16] + "-" + uid[16:20] + "-" + uid[20:32], Controller: true, BlockOwnerDeletion: true}},
	}
}

// Hash is the hex SHA-256 of its arguments' printed forms: a stable digest or name part.
func Hash(parts ...any) string {
	sum := sha256.Sum256(fmt.Append(nil, parts...))
	return hex.EncodeToString(sum[:])
}
