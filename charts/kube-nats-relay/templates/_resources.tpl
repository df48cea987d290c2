{{/*
kube-nats-relay.resourceNames: every other name the relay accepts for a built-in resource,
as "group/name group/resource" (the group empty for the core group): the core group's plurals
themselves; without a group, the plurals of other groups, and singulars and kubectl's short
names (cm, deploy); with their group, singulars and short names (deployment.apps). The relay
resolves them through discovery as kubectl does; the chart's RBAC must name the resource
itself. A short name of two resources ("?" and their spellings) resolves to either, in the
order of aggregated discovery, which is not fixed: the chart refuses it. The chart's test
derives this table from the apiserver's discovery.
*/}}
{{- define "kube-nats-relay.resourceNames" -}}
/apiservice apiregistration.k8s.io/apiservices
/apiservices apiregistration.k8s.io/apiservices
/certificatesigningrequest certificates.k8s.io/certificatesigningrequests
/certificatesigningrequests certificates.k8s.io/certificatesigningrequests
/cj batch/cronjobs
/clusterrole rbac.authorization.k8s.io/clusterroles
/clusterrolebinding rbac.authorization.k8s.io/clusterrolebindings
/clusterrolebindings rbac.authorization.k8s.io/clusterrolebindings
/clusterroles rbac.authorization.k8s.io/clusterroles
/clustertrustbundle certificates.k8s.io/clustertrustbundles
/clustertrustbundles certificates.k8s.io/clustertrustbundles
/cm /configmaps
/configmap /configmaps
/configmaps /configmaps
/controllerrevision apps/controllerrevisions
/controllerrevisions apps/controllerrevisions
/crd apiextensions.k8s.io/customresourcedefinitions
/crds apiextensions.k8s.io/customresourcedefinitions
/cronjob batch/cronjobs
/cronjobs batch/cronjobs
/csidriver storage.k8s.io/csidrivers
/csidrivers storage.k8s.io/csidrivers
/csinode storage.k8s.io/csinodes
/csinodes storage.k8s.io/csinodes
/csistoragecapacities storage.k8s.io/csistoragecapacities
/csistoragecapacity storage.k8s.io/csistoragecapacities
/csr certificates.k8s.io/certificatesigningrequests
/customresourcedefinition apiextensions.k8s.io/customresourcedefinitions
/customresourcedefinitions apiextensions.k8s.io/customresourcedefinitions
/daemonset apps/daemonsets
/daemonsets apps/daemonsets
/deploy apps/deployments
/deployment apps/deployments
/deployments apps/deployments
/deviceclass resource.k8s.io/deviceclasses
/deviceclasses resource.k8s.io/deviceclasses
/devicetaintrule resource.k8s.io/devicetaintrules
/devicetaintrules resource.k8s.io/devicetaintrules
/ds apps/daemonsets
/endpoints /endpoints
/endpointslice discovery.k8s.io/endpointslices
/endpointslices discovery.k8s.io/endpointslices
/ep /endpoints
/ev ?events|events.events.k8s.io
/event /events
/events /events
/flowschema flowcontrol.apiserver.k8s.io/flowschemas
/flowschemas flowcontrol.apiserver.k8s.io/flowschemas
/horizontalpodautoscaler autoscaling/horizontalpodautoscalers
/horizontalpodautoscalers autoscaling/horizontalpodautoscalers
/hpa autoscaling/horizontalpodautoscalers
/ing networking.k8s.io/ingresses
/ingress networking.k8s.io/ingresses
/ingressclass networking.k8s.io/ingressclasses
/ingressclasses networking.k8s.io/ingressclasses
/ingresses networking.k8s.io/ingresses
/ip networking.k8s.io/ipaddresses
/ipaddress networking.k8s.io/ipaddresses
/ipaddresses networking.k8s.io/ipaddresses
/job batch/jobs
/jobs batch/jobs
/lease coordination.k8s.io/leases
/leases coordination.k8s.io/leases
/limitrange /limitranges
/limitranges /limitranges
/limits /limitranges
/mutatingadmissionpolicies admissionregistration.k8s.io/mutatingadmissionpolicies
/mutatingadmissionpolicy admissionregistration.k8s.io/mutatingadmissionpolicies
/mutatingadmissionpolicybinding admissionregistration.k8s.io/mutatingadmissionpolicybindings
/mutatingadmissionpolicybindings admissionregistration.k8s.io/mutatingadmissionpolicybindings
/mutatingwebhookconfiguration admissionregistration.k8s.io/mutatingwebhookconfigurations
/mutatingwebhookconfigurations admissionregistration.k8s.io/mutatingwebhookconfigurations
/namespace /namespaces
/namespaces /namespaces
/netpol networking.k8s.io/networkpolicies
/networkpolicies networking.k8s.io/networkpolicies
/networkpolicy networking.k8s.io/networkpolicies
/no /nodes
/node /nodes
/nodes /nodes
/ns /namespaces
/pc scheduling.k8s.io/priorityclasses
/pdb policy/poddisruptionbudgets
/persistentvolume /persistentvolumes
/persistentvolumeclaim /persistentvolumeclaims
/persistentvolumeclaims /persistentvolumeclaims
/persistentvolumes /persistentvolumes
/po /pods
/pod /pods
/podcertificaterequest certificates.k8s.io/podcertificaterequests
/podcertificaterequests certificates.k8s.io/podcertificaterequests
/poddisruptionbudget policy/poddisruptionbudgets
/poddisruptionbudgets policy/poddisruptionbudgets
/pods /pods
/podtemplate /podtemplates
/podtemplates /podtemplates
/priorityclass scheduling.k8s.io/priorityclasses
/priorityclasses scheduling.k8s.io/priorityclasses
/prioritylevelconfiguration flowcontrol.apiserver.k8s.io/prioritylevelconfigurations
/prioritylevelconfigurations flowcontrol.apiserver.k8s.io/prioritylevelconfigurations
/pv /persistentvolumes
/pvc /persistentvolumeclaims
/quota /resourcequotas
/rc /replicationcontrollers
/replicaset apps/replicasets
/replicasets apps/replicasets
/replicationcontroller /replicationcontrollers
/replicationcontrollers /replicationcontrollers
/resourceclaim resource.k8s.io/resourceclaims
/resourceclaims resource.k8s.io/resourceclaims
/resourceclaimtemplate resource.k8s.io/resourceclaimtemplates
/resourceclaimtemplates resource.k8s.io/resourceclaimtemplates
/resourcequota /resourcequotas
/resourcequotas /resourcequotas
/resourceslice resource.k8s.io/resourceslices
/resourceslices resource.k8s.io/resourceslices
/role rbac.authorization.k8s.io/roles
/rolebinding rbac.authorization.k8s.io/rolebindings
/rolebindings rbac.authorization.k8s.io/rolebindings
/roles rbac.authorization.k8s.io/roles
/rs apps/replicasets
/runtimeclass node.k8s.io/runtimeclasses
/runtimeclasses node.k8s.io/runtimeclasses
/sa /serviceaccounts
/sc storage.k8s.io/storageclasses
/secret /secrets
/secrets /secrets
/service /services
/serviceaccount /serviceaccounts
/serviceaccounts /serviceaccounts
/servicecidr networking.k8s.io/servicecidrs
/servicecidrs networking.k8s.io/servicecidrs
/services /services
/statefulset apps/statefulsets
/statefulsets apps/statefulsets
/storageclass storage.k8s.io/storageclasses
/storageclasses storage.k8s.io/storageclasses
/storageversionmigration storagemigration.k8s.io/storageversionmigrations
/storageversionmigrations storagemigration.k8s.io/storageversionmigrations
/sts apps/statefulsets
/svc /services
/vac storage.k8s.io/volumeattributesclasses
/validatingadmissionpolicies admissionregistration.k8s.io/validatingadmissionpolicies
/validatingadmissionpolicy admissionregistration.k8s.io/validatingadmissionpolicies
/validatingadmissionpolicybinding admissionregistration.k8s.io/validatingadmissionpolicybindings
/validatingadmissionpolicybindings admissionregistration.k8s.io/validatingadmissionpolicybindings
/validatingwebhookconfiguration admissionregistration.k8s.io/validatingwebhookconfigurations
/validatingwebhookconfigurations admissionregistration.k8s.io/validatingwebhookconfigurations
/volumeattachment storage.k8s.io/volumeattachments
/volumeattachments storage.k8s.io/volumeattachments
/volumeattributesclass storage.k8s.io/volumeattributesclasses
/volumeattributesclasses storage.k8s.io/volumeattributesclasses
admissionregistration.k8s.io/mutatingadmissionpolicy admissionregistration.k8s.io/mutatingadmissionpolicies
admissionregistration.k8s.io/mutatingadmissionpolicybinding admissionregistration.k8s.io/mutatingadmissionpolicybindings
admissionregistration.k8s.io/mutatingwebhookconfiguration admissionregistration.k8s.io/mutatingwebhookconfigurations
admissionregistration.k8s.io/validatingadmissionpolicy admissionregistration.k8s.io/validatingadmissionpolicies
admissionregistration.k8s.io/validatingadmissionpolicybinding admissionregistration.k8s.io/validatingadmissionpolicybindings
admissionregistration.k8s.io/validatingwebhookconfiguration admissionregistration.k8s.io/validatingwebhookconfigurations
apiextensions.k8s.io/crd apiextensions.k8s.io/customresourcedefinitions
apiextensions.k8s.io/crds apiextensions.k8s.io/customresourcedefinitions
apiextensions.k8s.io/customresourcedefinition apiextensions.k8s.io/customresourcedefinitions
apiregistration.k8s.io/apiservice apiregistration.k8s.io/apiservices
apps/controllerrevision apps/controllerrevisions
apps/daemonset apps/daemonsets
apps/deploy apps/deployments
apps/deployment apps/deployments
apps/ds apps/daemonsets
apps/replicaset apps/replicasets
apps/rs apps/replicasets
apps/statefulset apps/statefulsets
apps/sts apps/statefulsets
autoscaling/horizontalpodautoscaler autoscaling/horizontalpodautoscalers
autoscaling/hpa autoscaling/horizontalpodautoscalers
batch/cj batch/cronjobs
batch/cronjob batch/cronjobs
batch/job batch/jobs
certificates.k8s.io/certificatesigningrequest certificates.k8s.io/certificatesigningrequests
certificates.k8s.io/clustertrustbundle certificates.k8s.io/clustertrustbundles
certificates.k8s.io/csr certificates.k8s.io/certificatesigningrequests
certificates.k8s.io/podcertificaterequest certificates.k8s.io/podcertificaterequests
coordination.k8s.io/lease coordination.k8s.io/leases
discovery.k8s.io/endpointslice discovery.k8s.io/endpointslices
events.k8s.io/ev events.k8s.io/events
events.k8s.io/event events.k8s.io/events
flowcontrol.apiserver.k8s.io/flowschema flowcontrol.apiserver.k8s.io/flowschemas
flowcontrol.apiserver.k8s.io/prioritylevelconfiguration flowcontrol.apiserver.k8s.io/prioritylevelconfigurations
networking.k8s.io/ing networking.k8s.io/ingresses
networking.k8s.io/ingress networking.k8s.io/ingresses
networking.k8s.io/ingressclass networking.k8s.io/ingressclasses
networking.k8s.io/ip networking.k8s.io/ipaddresses
networking.k8s.io/ipaddress networking.k8s.io/ipaddresses
networking.k8s.io/netpol networking.k8s.io/networkpolicies
networking.k8s.io/networkpolicy networking.k8s.io/networkpolicies
networking.k8s.io/servicecidr networking.k8s.io/servicecidrs
node.k8s.io/runtimeclass node.k8s.io/runtimeclasses
policy/pdb policy/poddisruptionbudgets
policy/poddisruptionbudget policy/poddisruptionbudgets
rbac.authorization.k8s.io/clusterrole rbac.authorization.k8s.io/clusterroles
rbac.authorization.k8s.io/clusterrolebinding rbac.authorization.k8s.io/clusterrolebindings
rbac.authorization.k8s.io/role rbac.authorization.k8s.io/roles
rbac.authorization.k8s.io/rolebinding rbac.authorization.k8s.io/rolebindings
resource.k8s.io/deviceclass resource.k8s.io/deviceclasses
resource.k8s.io/devicetaintrule resource.k8s.io/devicetaintrules
resource.k8s.io/resourceclaim resource.k8s.io/resourceclaims
resource.k8s.io/resourceclaimtemplate resource.k8s.io/resourceclaimtemplates
resource.k8s.io/resourceslice resource.k8s.io/resourceslices
scheduling.k8s.io/pc scheduling.k8s.io/priorityclasses
scheduling.k8s.io/priorityclass scheduling.k8s.io/priorityclasses
storage.k8s.io/csidriver storage.k8s.io/csidrivers
storage.k8s.io/csinode storage.k8s.io/csinodes
storage.k8s.io/csistoragecapacity storage.k8s.io/csistoragecapacities
storage.k8s.io/sc storage.k8s.io/storageclasses
storage.k8s.io/storageclass storage.k8s.io/storageclasses
storage.k8s.io/vac storage.k8s.io/volumeattributesclasses
storage.k8s.io/volumeattachment storage.k8s.io/volumeattachments
storage.k8s.io/volumeattributesclass storage.k8s.io/volumeattributesclasses
storagemigration.k8s.io/storageversionmigration storagemigration.k8s.io/storageversionmigrations
{{- end }}

{{/*
kube-nats-relay.resourceKey: a resource spec as the RBAC names it, "group/resource", from a
dict with "spec" (as written) and "from" (the value it came from, for messages). A name of
the resourceNames table becomes its resource. A name without a group that is not in the
table cannot be granted (the core group's names are a closed set) and fails the rendering; a
name with a group outside the table is taken as written (a CRD's plural).
*/}}
{{- define "kube-nats-relay.resourceKey" -}}
{{- $key := include "kube-nats-relay.parseResource" (trim .spec) }}
{{- $names := dict }}
{{- range splitList "\n" (include "kube-nats-relay.resourceNames" .) }}
{{- $f := splitList " " (trim .) }}
{{- if eq (len $f) 2 }}{{ $_ := set $names (first $f) (last $f) }}{{ end }}
{{- end }}
{{- $known := get $names $key }}
{{- if hasPrefix "?" $known }}
{{- fail (printf "%s: %q is a short name of more than one resource and the relay may resolve it to either: write one of %s" .from .spec (trimPrefix "?" $known | splitList "|" | join ", ")) }}
{{- else if $known }}
{{- $known }}
{{- else if hasPrefix "/" $key }}
{{- fail (printf "%s: %q is no resource of the core group, nor a short name or singular of a built-in resource the chart knows: write the plural resource with its group, as kubectl's api-resources lists it (deployments.apps, widgets.example.com)" .from .spec) }}
{{- else }}
{{- include "kube-nats-relay.crdResource" $key }}
{{- end }}
{{- end }}

{{/*
kube-nats-relay.crdResource: a "group/name" outside the built-in groups as "group/plural":
when no CustomResourceDefinition is named after it but one of that group has it as its
singular or a short name (gizmo.example.com, gz.example.com), that CRD's plural. Looked up
in the cluster: under `helm template` the name is kept as written.
*/}}
{{- define "kube-nats-relay.crdResource" -}}
{{- $group := regexReplaceAll "/[^/]*$" . "" }}
{{- $name := regexReplaceAll "^.*/" . "" }}
{{- $out := . }}
{{- if and (contains "." $group) (not (hasSuffix ".k8s.io" $group)) }}
{{- if not (lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" (printf "%s.%s" $name $group)) }}
{{- range (dig "items" list (lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" "" | default dict)) }}
{{- $names := dig "status" "acceptedNames" (dig "spec" "names" dict .) . }}
{{- if and (eq (dig "spec" "group" "" .) $group) (or (eq (get $names "singular" | default "") $name) (has $name (get $names "shortNames" | default list))) }}
{{- $out = printf "%s/%s" $group (get $names "plural") }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- $out }}
{{- end }}

{{/*
kube-nats-relay.crdScope: the scope ("Cluster" or "Namespaced") of the CustomResourceDefinition
behind a "group/resource" outside the built-in groups, looked up in the cluster; empty for a
built-in group, under `helm template` (no cluster) and when the CRD does not exist (yet).
*/}}
{{- define "kube-nats-relay.crdScope" -}}
{{- $group := regexReplaceAll "/[^/]*$" . "" }}
{{- if and (contains "." $group) (not (hasSuffix ".k8s.io" $group)) }}
{{- $crd := lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" (printf "%s.%s" (regexReplaceAll "^.*/" . "") $group) }}
{{- dig "spec" "scope" "" ($crd | default dict) }}
{{- end }}
{{- end }}
