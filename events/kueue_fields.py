"""The field names of Kueue's v1beta2 kinds, from its CRDs (scripts/gen_kueue_fields.py).

Per kind a tree of field name -> the names under it (None: not checked further).
What strict field validation (kubectl's default) refuses anything outside of."""

from typing import Any

KNOWN_FIELDS: dict[str, Any] = {
    "AdmissionCheck": {
        "apiVersion": None,
        "kind": None,
        "metadata": None,
        "spec": {"controllerName": None, "parameters": {"apiGroup": None, "kind": None, "name": None}},
        "status": None,
    },
    "ClusterQueue": {
        "apiVersion": None,
        "kind": None,
        "metadata": None,
        "spec": {
            "admissionChecksStrategy": {"admissionChecks": {"name": None, "onFlavors": None}},
            "admissionScope": {"admissionMode": None},
            "cohortName": None,
            "concurrentAdmissionPolicy": {
                "migration": {"constraints": {"lastAcceptableFlavorName": None}, "mode": None}
            },
            "fairSharing": {"weight": None},
            "flavorFungibility": {"preference": None, "whenCanBorrow": None, "whenCanPreempt": None},
            "namespaceSelector": {
                "matchExpressions": {"key": None, "operator": None, "values": None},
                "matchLabels": None,
            },
            "preemption": {
                "borrowWithinCohort": {"maxPriorityThreshold": None, "policy": None},
                "reclaimWithinCohort": None,
                "withinClusterQueue": None,
            },
            "queueingStrategy": None,
            "resourceGroups": {
                "coveredResources": None,
                "flavors": {
                    "name": None,
                    "resources": {"borrowingLimit": None, "lendingLimit": None, "name": None, "nominalQuota": None},
                },
            },
            "stopPolicy": None,
        },
        "status": None,
    },
    "Cohort": {
        "apiVersion": None,
        "kind": None,
        "metadata": None,
        "spec": {
            "fairSharing": {"weight": None},
            "parentName": None,
            "resourceGroups": {
                "coveredResources": None,
                "flavors": {
                    "name": None,
                    "resources": {"borrowingLimit": None, "lendingLimit": None, "name": None, "nominalQuota": None},
                },
            },
        },
        "status": None,
    },
    "LocalQueue": {
        "apiVersion": None,
        "kind": None,
        "metadata": None,
        "spec": {"clusterQueue": None, "fairSharing": {"weight": None}, "stopPolicy": None},
        "status": None,
    },
    "MultiKueueCluster": {
        "apiVersion": None,
        "kind": None,
        "metadata": None,
        "spec": {
            "clusterSource": {
                "clusterProfileRef": {"name": None},
                "kubeConfig": {"location": None, "locationType": None},
            }
        },
        "status": None,
    },
    "MultiKueueConfig": {
        "apiVersion": None,
        "kind": None,
        "metadata": None,
        "spec": {"clusters": None, "quotaManagement": None},
    },
    "ResourceFlavor": {
        "apiVersion": None,
        "kind": None,
        "metadata": None,
        "spec": {
            "nodeLabels": None,
            "nodeTaints": {"effect": None, "key": None, "timeAdded": None, "value": None},
            "tolerations": {"effect": None, "key": None, "operator": None, "tolerationSeconds": None, "value": None},
            "topologyName": None,
        },
    },
    "Topology": {"apiVersion": None, "kind": None, "metadata": None, "spec": {"levels": {"nodeLabel": None}}},
    "Workload": {
        "apiVersion": None,
        "kind": None,
        "metadata": None,
        "spec": {
            "active": None,
            "maximumExecutionTimeSeconds": None,
            "podSets": {
                "count": None,
                "minCount": None,
                "name": None,
                "template": None,
                "topologyRequest": {
                    "podIndexLabel": None,
                    "podSetGroupName": None,
                    "podSetSliceRequiredTopology": None,
                    "podSetSliceSize": None,
                    "podsetSliceRequiredTopologyConstraints": {"size": None, "topology": None},
                    "preferred": None,
                    "required": None,
                    "subGroupCount": None,
                    "subGroupIndexLabel": None,
                    "unconstrained": None,
                },
            },
            "preemptionGates": {"name": None},
            "priority": None,
            "priorityClassRef": {"group": None, "kind": None, "name": None},
            "queueName": None,
        },
        "status": None,
    },
    "WorkloadPriorityClass": {"apiVersion": None, "description": None, "kind": None, "metadata": None, "value": None},
}
