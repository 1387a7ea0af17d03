"""The field names of the Kubernetes API schema (1.34) for the kinds ksched accepts.

Not ksched's models: real objects carry many fields ksched never reads, and every
one of them is known here, so that only a field the API server would not know is
reported (shared/api/schema.py). Taken from the Go types of k8s.io/api core/v1,
apps/v1, batch/v1, policy/v1, scheduling/v1 and apimachinery's meta/v1 at 1.34, and
scheduler-plugins' PodGroup (scheduling.x-k8s.io/v1alpha1).

Notation, one string per type, fields separated by blanks:
  name        a scalar (string, number, bool, quantity, time, int-or-string) or a
              list of scalars: nothing below it is checked
  name:{}     a free-form map (labels, requests, nodeSelector, ...): keys are data
  name:T      an object of type T
  name:[T]    a list of objects of type T
  ...T        T's fields inlined here (Go's embedded structs)
Types of the same shape share one entry, under a name of ours where Go has several.
"""

from __future__ import annotations

META = {
    "TypeMeta": "apiVersion kind",
    "ObjectMeta": """name generateName namespace selfLink uid resourceVersion generation
        creationTimestamp deletionTimestamp deletionGracePeriodSeconds finalizers
        labels:{} annotations:{} ownerReferences:[OwnerReference]
        managedFields:[ManagedFieldsEntry]""",
    "OwnerReference": "apiVersion kind name uid controller blockOwnerDeletion",
    "ManagedFieldsEntry": "manager operation apiVersion time fieldsType fieldsV1:{} subresource",
    "LabelSelector": "matchLabels:{} matchExpressions:[Requirement]",
    "Requirement": "key operator values",  # label and node selector requirements alike
    "Condition": "type status observedGeneration lastTransitionTime reason message",
    "LocalObjectReference": "name",
    "OptionalReference": "name optional",  # ConfigMapEnvSource, SecretEnvSource
    "KeySelector": "name key optional",  # ConfigMapKeySelector, SecretKeySelector
}

POD = {
    "Pod": "...TypeMeta metadata:ObjectMeta spec:PodSpec status:PodStatus",
    "PodTemplateSpec": "metadata:ObjectMeta spec:PodSpec",
    "PodSpec": """volumes:[Volume] initContainers:[Container] containers:[Container]
        ephemeralContainers:[EphemeralContainer] restartPolicy terminationGracePeriodSeconds
        activeDeadlineSeconds dnsPolicy nodeSelector:{} serviceAccountName serviceAccount
        automountServiceAccountToken nodeName hostNetwork hostPID hostIPC
        shareProcessNamespace securityContext:PodSecurityContext
        imagePullSecrets:[LocalObjectReference] hostname subdomain affinity:Affinity
        schedulerName tolerations:[Toleration] hostAliases:[HostAlias] priorityClassName
        priority dnsConfig:PodDNSConfig readinessGates:[PodReadinessGate] runtimeClassName
        enableServiceLinks preemptionPolicy overhead:{}
        topologySpreadConstraints:[TopologySpreadConstraint] setHostnameAsFQDN os:PodOS
        hostUsers schedulingGates:[PodSchedulingGate] resourceClaims:[PodResourceClaim]
        resources:ResourceRequirements hostnameOverride workloadRef:WorkloadReference
        schedulingGroup:PodSchedulingGroup""",
    "WorkloadReference": "name podGroup podGroupReplicaKey",
    "PodSchedulingGroup": "podGroupName",
    "PodSecurityContext": """seLinuxOptions:SELinuxOptions windowsOptions:WindowsOptions
        runAsUser runAsGroup runAsNonRoot supplementalGroups supplementalGroupsPolicy fsGroup
        sysctls:[NameValue] fsGroupChangePolicy seccompProfile:Profile
        appArmorProfile:Profile seLinuxChangePolicy""",
    "SELinuxOptions": "user role type level",
    "WindowsOptions": "gmsaCredentialSpecName gmsaCredentialSpec runAsUserName hostProcess",
    "Profile": "type localhostProfile",  # SeccompProfile, AppArmorProfile
    "NameValue": "name value",  # Sysctl, HTTPHeader
    "HostAlias": "ip hostnames",
    "PodDNSConfig": "nameservers searches options:[NameValue]",
    "PodReadinessGate": "conditionType",
    "PodOS": "name",
    "PodSchedulingGate": "name",
    "PodResourceClaim": "name resourceClaimName resourceClaimTemplateName",
    "PodStatus": """observedGeneration phase conditions:[PodCondition] message reason
        nominatedNodeName hostIP hostIPs:[IP] podIP podIPs:[IP] startTime
        initContainerStatuses:[ContainerStatus] containerStatuses:[ContainerStatus] qosClass
        ephemeralContainerStatuses:[ContainerStatus] resize
        resourceClaimStatuses:[PodResourceClaimStatus]
        extendedResourceClaimStatus:PodExtendedResourceClaimStatus""",
    "PodCondition": """type observedGeneration status lastProbeTime lastTransitionTime reason
        message""",
    "IP": "ip",
    "PodResourceClaimStatus": "name resourceClaimName",
    "PodExtendedResourceClaimStatus": """requestMappings:[ContainerExtendedResourceRequest]
        resourceClaimName""",
    "ContainerExtendedResourceRequest": "containerName resourceName requestName",
}

CONTAINER = {
    "Container": """name image command args workingDir ports:[ContainerPort]
        envFrom:[EnvFromSource] env:[EnvVar] resources:ResourceRequirements
        resizePolicy:[ContainerResizePolicy] restartPolicy restartPolicyRules:[ContainerRestartRule]
        volumeMounts:[VolumeMount] volumeDevices:[VolumeDevice] livenessProbe:Probe
        readinessProbe:Probe startupProbe:Probe lifecycle:Lifecycle terminationMessagePath
        terminationMessagePolicy imagePullPolicy securityContext:SecurityContext stdin
        stdinOnce tty""",
    "EphemeralContainer": "...Container targetContainerName",
    "ContainerPort": "name hostPort containerPort protocol hostIP",
    "EnvFromSource": "prefix configMapRef:OptionalReference secretRef:OptionalReference",
    "EnvVar": "name value valueFrom:EnvVarSource",
    "EnvVarSource": """fieldRef:ObjectFieldSelector resourceFieldRef:ResourceFieldSelector
        configMapKeyRef:KeySelector secretKeyRef:KeySelector fileKeyRef:FileKeySelector""",
    "ObjectFieldSelector": "apiVersion fieldPath",
    "ResourceFieldSelector": "containerName resource divisor",
    "FileKeySelector": "volumeName path key optional",
    "ResourceRequirements": "limits:{} requests:{} claims:[ResourceClaim]",
    "ResourceClaim": "name request",
    "ContainerResizePolicy": "resourceName restartPolicy",
    "ContainerRestartRule": "action exitCodes:ContainerRestartRuleOnExitCodes",
    "ContainerRestartRuleOnExitCodes": "operator values",
    "VolumeMount": """name readOnly recursiveReadOnly mountPath subPath mountPropagation
        subPathExpr""",
    "VolumeDevice": "name devicePath",
    "Probe": """...ProbeHandler initialDelaySeconds timeoutSeconds periodSeconds
        successThreshold failureThreshold terminationGracePeriodSeconds""",
    "ProbeHandler": """exec:ExecAction httpGet:HTTPGetAction tcpSocket:TCPSocketAction
        grpc:GRPCAction""",
    "Lifecycle": "postStart:LifecycleHandler preStop:LifecycleHandler stopSignal",
    "LifecycleHandler": """exec:ExecAction httpGet:HTTPGetAction tcpSocket:TCPSocketAction
        sleep:SleepAction""",
    "ExecAction": "command",
    "HTTPGetAction": "path port host scheme httpHeaders:[NameValue]",
    "TCPSocketAction": "port host",
    "GRPCAction": "port service",
    "SleepAction": "seconds",
    "SecurityContext": """capabilities:Capabilities privileged seLinuxOptions:SELinuxOptions
        windowsOptions:WindowsOptions runAsUser runAsGroup runAsNonRoot readOnlyRootFilesystem
        allowPrivilegeEscalation procMount seccompProfile:Profile appArmorProfile:Profile""",
    "Capabilities": "add drop",
    "ContainerStatus": """name state:ContainerState lastState:ContainerState ready
        restartCount image imageID containerID started allocatedResources:{}
        resources:ResourceRequirements volumeMounts:[VolumeMountStatus] user:ContainerUser
        allocatedResourcesStatus:[ResourceStatus] stopSignal""",
    "ContainerState": """waiting:ContainerStateWaiting running:ContainerStateRunning
        terminated:ContainerStateTerminated""",
    "ContainerStateWaiting": "reason message",
    "ContainerStateRunning": "startedAt",
    "ContainerStateTerminated": "exitCode signal reason message startedAt finishedAt containerID",
    "VolumeMountStatus": "name mountPath readOnly recursiveReadOnly",
    "ContainerUser": "linux:LinuxContainerUser",
    "LinuxContainerUser": "uid gid supplementalGroups",
    "ResourceStatus": "name resources:[ResourceHealth]",
    "ResourceHealth": "resourceID health",
}

VOLUMES = {
    "Volume": "name ...VolumeSource",
    "VolumeSource": """hostPath:HostPathVolumeSource emptyDir:EmptyDirVolumeSource
        gcePersistentDisk:GCEPersistentDiskVolumeSource
        awsElasticBlockStore:AWSElasticBlockStoreVolumeSource gitRepo:GitRepoVolumeSource
        secret:SecretVolumeSource nfs:NFSVolumeSource iscsi:ISCSIVolumeSource
        glusterfs:GlusterfsVolumeSource persistentVolumeClaim:PVCVolumeSource
        rbd:RBDVolumeSource flexVolume:FlexVolumeSource cinder:CinderVolumeSource
        cephfs:CephFSVolumeSource flocker:FlockerVolumeSource
        downwardAPI:DownwardAPIVolumeSource fc:FCVolumeSource azureFile:AzureFileVolumeSource
        configMap:ConfigMapVolumeSource vsphereVolume:VsphereVirtualDiskVolumeSource
        quobyte:QuobyteVolumeSource azureDisk:AzureDiskVolumeSource
        photonPersistentDisk:PhotonPersistentDiskVolumeSource projected:ProjectedVolumeSource
        portworxVolume:PortworxVolumeSource scaleIO:ScaleIOVolumeSource
        storageos:StorageOSVolumeSource csi:CSIVolumeSource ephemeral:EphemeralVolumeSource
        image:ImageVolumeSource""",
    "HostPathVolumeSource": "path type",
    "EmptyDirVolumeSource": "medium sizeLimit",
    "GCEPersistentDiskVolumeSource": "pdName fsType partition readOnly",
    "AWSElasticBlockStoreVolumeSource": "volumeID fsType partition readOnly",
    "GitRepoVolumeSource": "repository revision directory",
    "SecretVolumeSource": "secretName items:[KeyToPath] defaultMode optional",
    "KeyToPath": "key path mode",
    "NFSVolumeSource": "server path readOnly",
    "ISCSIVolumeSource": """targetPortal iqn lun iscsiInterface fsType readOnly portals
        chapAuthDiscovery chapAuthSession secretRef:LocalObjectReference initiatorName""",
    "GlusterfsVolumeSource": "endpoints path readOnly",
    "PVCVolumeSource": "claimName readOnly",
    "RBDVolumeSource": """monitors image fsType pool user keyring secretRef:LocalObjectReference
        readOnly""",
    "FlexVolumeSource": "driver fsType secretRef:LocalObjectReference readOnly options:{}",
    "CinderVolumeSource": "volumeID fsType readOnly secretRef:LocalObjectReference",
    "CephFSVolumeSource": """monitors path user secretFile secretRef:LocalObjectReference
        readOnly""",
    "FlockerVolumeSource": "datasetName datasetUUID",
    "DownwardAPIVolumeSource": "items:[DownwardAPIVolumeFile] defaultMode",
    "DownwardAPIVolumeFile": """path fieldRef:ObjectFieldSelector
        resourceFieldRef:ResourceFieldSelector mode""",
    "FCVolumeSource": "targetWWNs lun fsType readOnly wwids",
    "AzureFileVolumeSource": "secretName shareName readOnly",
    "ConfigMapVolumeSource": "name items:[KeyToPath] defaultMode optional",
    "VsphereVirtualDiskVolumeSource": "volumePath fsType storagePolicyName storagePolicyID",
    "QuobyteVolumeSource": "registry volume readOnly user group tenant",
    "AzureDiskVolumeSource": "diskName diskURI cachingMode fsType readOnly kind",
    "PhotonPersistentDiskVolumeSource": "pdID fsType",
    "ProjectedVolumeSource": "sources:[VolumeProjection] defaultMode",
    "VolumeProjection": """secret:KeysProjection downwardAPI:DownwardAPIProjection
        configMap:KeysProjection serviceAccountToken:ServiceAccountTokenProjection
        clusterTrustBundle:ClusterTrustBundleProjection podCertificate:PodCertificateProjection""",
    "KeysProjection": "name items:[KeyToPath] optional",  # SecretProjection, ConfigMapProjection
    "DownwardAPIProjection": "items:[DownwardAPIVolumeFile]",
    "ServiceAccountTokenProjection": "audience expirationSeconds path",
    "ClusterTrustBundleProjection": "name signerName labelSelector:LabelSelector optional path",
    "PodCertificateProjection": """signerName keyType maxExpirationSeconds credentialBundlePath
        keyPath certificateChainPath""",
    "PortworxVolumeSource": "volumeID fsType readOnly",
    "ScaleIOVolumeSource": """gateway system secretRef:LocalObjectReference sslEnabled
        protectionDomain storagePool storageMode volumeName fsType readOnly""",
    "StorageOSVolumeSource": """volumeName volumeNamespace fsType readOnly
        secretRef:LocalObjectReference""",
    "CSIVolumeSource": """driver readOnly fsType volumeAttributes:{}
        nodePublishSecretRef:LocalObjectReference""",
    "EphemeralVolumeSource": "volumeClaimTemplate:PersistentVolumeClaimTemplate",
    "PersistentVolumeClaimTemplate": "metadata:ObjectMeta spec:PersistentVolumeClaimSpec",
    "ImageVolumeSource": "reference pullPolicy",
    # StatefulSets' volumeClaimTemplates are whole PersistentVolumeClaims
    "PersistentVolumeClaim": """...TypeMeta metadata:ObjectMeta spec:PersistentVolumeClaimSpec
        status:PersistentVolumeClaimStatus""",
    "PersistentVolumeClaimSpec": """accessModes selector:LabelSelector
        resources:VolumeResourceRequirements volumeName storageClassName volumeMode
        dataSource:TypedLocalObjectReference dataSourceRef:TypedObjectReference
        volumeAttributesClassName""",
    "VolumeResourceRequirements": "limits:{} requests:{}",
    "TypedLocalObjectReference": "apiGroup kind name",
    "TypedObjectReference": "apiGroup kind name namespace",
    "PersistentVolumeClaimStatus": """phase accessModes capacity:{} conditions:[ProbedCondition]
        allocatedResources:{} allocatedResourceStatuses:{} currentVolumeAttributesClassName
        modifyVolumeStatus:ModifyVolumeStatus""",
    "ModifyVolumeStatus": "targetVolumeAttributesClassName status",
}

SCHEDULING = {
    "Affinity": "nodeAffinity:NodeAffinity podAffinity:PodAffinity podAntiAffinity:PodAffinity",
    "NodeAffinity": """requiredDuringSchedulingIgnoredDuringExecution:NodeSelector
        preferredDuringSchedulingIgnoredDuringExecution:[PreferredSchedulingTerm]""",
    "NodeSelector": "nodeSelectorTerms:[NodeSelectorTerm]",
    "NodeSelectorTerm": "matchExpressions:[Requirement] matchFields:[Requirement]",
    "PreferredSchedulingTerm": "weight preference:NodeSelectorTerm",
    "PodAffinity": """requiredDuringSchedulingIgnoredDuringExecution:[PodAffinityTerm]
        preferredDuringSchedulingIgnoredDuringExecution:[WeightedPodAffinityTerm]""",
    "PodAffinityTerm": """labelSelector:LabelSelector namespaces topologyKey
        namespaceSelector:LabelSelector matchLabelKeys mismatchLabelKeys""",
    "WeightedPodAffinityTerm": "weight podAffinityTerm:PodAffinityTerm",
    "Toleration": "key operator value effect tolerationSeconds",
    "TopologySpreadConstraint": """maxSkew topologyKey whenUnsatisfiable
        labelSelector:LabelSelector minDomains nodeAffinityPolicy nodeTaintsPolicy
        matchLabelKeys""",
    "PriorityClass": """...TypeMeta metadata:ObjectMeta value globalDefault description
        preemptionPolicy""",
    "PodGroup": "...TypeMeta metadata:ObjectMeta spec:PodGroupSpec status:PodGroupStatus",
    # scheduling.k8s.io/v1alpha1 Workload (1.35)
    "Workload": "...TypeMeta metadata:ObjectMeta spec:WorkloadSpec",
    "WorkloadSpec": "controllerRef:TypedLocalObjectReference podGroups:[WorkloadPodGroup]",
    "TypedLocalObjectReference": "apiGroup kind name",
    "WorkloadPodGroup": "name policy:PodGroupPolicy",
    "PodGroupPolicy": "basic:BasicSchedulingPolicy gang:GangSchedulingPolicy",
    "BasicSchedulingPolicy": "",
    "GangSchedulingPolicy": "minCount",
    # scheduling.k8s.io/v1alpha2 Workload and PodGroup (1.36)
    "WorkloadV1alpha2": "...TypeMeta metadata:ObjectMeta spec:WorkloadSpecV1alpha2",
    "WorkloadSpecV1alpha2": """controllerRef:TypedLocalObjectReference
        podGroupTemplates:[PodGroupTemplate]""",
    "PodGroupTemplate": """name schedulingPolicy:PodGroupPolicy
        schedulingConstraints:PodGroupSchedulingConstraints""",
    "PodGroupSchedulingConstraints": "topologyConstraints:[TopologyConstraint]",
    "TopologyConstraint": "topologyKey",
    "PodGroupV1alpha2": """...TypeMeta metadata:ObjectMeta spec:PodGroupSpecV1alpha2
        status:PodGroupStatusV1alpha2""",
    "PodGroupSpecV1alpha2": """podGroupTemplateRef:PodGroupTemplateReference
        schedulingPolicy:PodGroupPolicy schedulingConstraints:PodGroupSchedulingConstraints""",
    "PodGroupTemplateReference": "workload:WorkloadPodGroupTemplateReference",
    "WorkloadPodGroupTemplateReference": "workloadName podGroupTemplateName",
    "PodGroupStatusV1alpha2": "conditions:[Condition]",
    # scheduling.k8s.io/v1beta1 Workload and PodGroup (1.37)
    "WorkloadV1beta1": "...TypeMeta metadata:ObjectMeta spec:WorkloadSpecV1beta1",
    "WorkloadSpecV1beta1": """controllerRef:TypedLocalObjectReference
        podGroupTemplates:[PodGroupTemplateV1beta1] compositePodGroupTemplates""",
    "PodGroupTemplateV1beta1": """name schedulingPolicy:PodGroupPolicy
        schedulingConstraints:PodGroupSchedulingConstraintsV1beta1
        resourceClaims:[PodGroupResourceClaim] disruptionMode:DisruptionMode
        priorityClassName priority preemptionPolicy""",
    "PodGroupSchedulingConstraintsV1beta1": "topology:[TopologyConstraintV1beta1]",
    "TopologyConstraintV1beta1": "key",
    "PodGroupResourceClaim": "name resourceClaimName resourceClaimTemplateName",
    "DisruptionMode": "single:NoFields all:NoFields",
    "NoFields": "",  # an empty struct: any field in it is unknown
    "PodGroupV1beta1": """...TypeMeta metadata:ObjectMeta spec:PodGroupSpecV1beta1
        status:PodGroupStatusV1beta1""",
    "PodGroupSpecV1beta1": """parentCompositePodGroupName workloadRef:PodGroupWorkloadReference
        schedulingPolicy:PodGroupPolicy
        schedulingConstraints:PodGroupSchedulingConstraintsV1beta1
        resourceClaims:[PodGroupResourceClaim] disruptionMode:DisruptionMode
        priorityClassName priority preemptionPolicy""",
    "PodGroupWorkloadReference": "workloadName templateName",
    "PodGroupStatusV1beta1": """conditions:[Condition]
        resourceClaimStatuses:[PodGroupResourceClaimStatus]""",
    "PodGroupResourceClaimStatus": "name resourceClaimName",
    "PodGroupSpec": "minMember minResources:{} scheduleTimeoutSeconds",
    "PodGroupStatus": "phase occupiedBy scheduled running succeeded failed scheduleStartTime",
    "PodDisruptionBudget": """...TypeMeta metadata:ObjectMeta spec:PodDisruptionBudgetSpec
        status:PodDisruptionBudgetStatus""",
    "PodDisruptionBudgetSpec": """minAvailable selector:LabelSelector maxUnavailable
        unhealthyPodEvictionPolicy""",
    "PodDisruptionBudgetStatus": """observedGeneration disruptedPods:{} disruptionsAllowed
        currentHealthy desiredHealthy expectedPods conditions:[Condition]""",
}

NODE = {
    "Node": "...TypeMeta metadata:ObjectMeta spec:NodeSpec status:NodeStatus",
    "NodeSpec": """podCIDR podCIDRs providerID unschedulable taints:[Taint]
        configSource:NodeConfigSource externalID""",
    "Taint": "key value effect timeAdded",
    "NodeConfigSource": "configMap:ConfigMapNodeConfigSource",
    "ConfigMapNodeConfigSource": "namespace name uid resourceVersion kubeletConfigKey",
    "NodeStatus": """capacity:{} allocatable:{} phase conditions:[NodeCondition]
        addresses:[NodeAddress] daemonEndpoints:NodeDaemonEndpoints nodeInfo:NodeSystemInfo
        images:[ContainerImage] volumesInUse volumesAttached:[AttachedVolume]
        config:NodeConfigStatus runtimeHandlers:[NodeRuntimeHandler] features:NodeFeatures""",
    "NodeCondition": "type status lastHeartbeatTime lastTransitionTime reason message",
    "NodeAddress": "type address",
    "NodeDaemonEndpoints": "kubeletEndpoint:DaemonEndpoint",
    "DaemonEndpoint": "Port",  # sic: the API's one capitalised field name
    "NodeSystemInfo": """machineID systemUUID bootID kernelVersion osImage
        containerRuntimeVersion kubeletVersion kubeProxyVersion operatingSystem architecture
        swap:NodeSwapStatus""",
    "NodeSwapStatus": "capacity",
    "ContainerImage": "names sizeBytes",
    "AttachedVolume": "name devicePath",
    "NodeConfigStatus": """assigned:NodeConfigSource active:NodeConfigSource
        lastKnownGood:NodeConfigSource error""",
    "NodeRuntimeHandler": "name features:NodeRuntimeHandlerFeatures",
    "NodeRuntimeHandlerFeatures": "recursiveReadOnlyMounts userNamespaces",
    "NodeFeatures": "supplementalGroupsPolicy",
}

WORKLOADS = {
    "Deployment": "...TypeMeta metadata:ObjectMeta spec:DeploymentSpec status:DeploymentStatus",
    "DeploymentSpec": """replicas selector:LabelSelector template:PodTemplateSpec
        strategy:DeploymentStrategy minReadySeconds revisionHistoryLimit paused
        progressDeadlineSeconds""",
    "DeploymentStrategy": "type rollingUpdate:RollingUpdate",
    "RollingUpdate": "maxUnavailable maxSurge",  # Deployment's and DaemonSet's
    "DeploymentStatus": """observedGeneration replicas updatedReplicas readyReplicas
        availableReplicas unavailableReplicas terminatingReplicas
        conditions:[DeploymentCondition] collisionCount""",
    "DeploymentCondition": "type status lastUpdateTime lastTransitionTime reason message",
    # ReplicaSet's, StatefulSet's and DaemonSet's conditions
    "WorkloadCondition": "type status lastTransitionTime reason message",
    "ProbedCondition": "type status lastProbeTime lastTransitionTime reason message",
    "ReplicaSet": "...TypeMeta metadata:ObjectMeta spec:ReplicaSetSpec status:ReplicaSetStatus",
    "ReplicaSetSpec": "replicas minReadySeconds selector:LabelSelector template:PodTemplateSpec",
    "ReplicaSetStatus": """replicas fullyLabeledReplicas readyReplicas availableReplicas
        terminatingReplicas observedGeneration conditions:[WorkloadCondition]""",
    "ReplicationController": """...TypeMeta metadata:ObjectMeta
        spec:ReplicationControllerSpec status:ReplicaSetStatus""",
    # core/v1: a selector that is a plain map; the status is a ReplicaSet's
    "ReplicationControllerSpec": "replicas minReadySeconds selector:{} template:PodTemplateSpec",
    "StatefulSet": """...TypeMeta metadata:ObjectMeta spec:StatefulSetSpec
        status:StatefulSetStatus""",
    "StatefulSetSpec": """replicas selector:LabelSelector template:PodTemplateSpec
        volumeClaimTemplates:[PersistentVolumeClaim] serviceName podManagementPolicy
        updateStrategy:StatefulSetUpdateStrategy revisionHistoryLimit minReadySeconds
        persistentVolumeClaimRetentionPolicy:PVCRetentionPolicy ordinals:StatefulSetOrdinals""",
    "StatefulSetUpdateStrategy": "type rollingUpdate:RollingUpdateStatefulSetStrategy",
    "RollingUpdateStatefulSetStrategy": "partition maxUnavailable",
    "PVCRetentionPolicy": "whenDeleted whenScaled",
    "StatefulSetOrdinals": "start",
    "StatefulSetStatus": """observedGeneration replicas readyReplicas currentReplicas
        updatedReplicas currentRevision updateRevision collisionCount
        conditions:[WorkloadCondition] availableReplicas""",
    "DaemonSet": "...TypeMeta metadata:ObjectMeta spec:DaemonSetSpec status:DaemonSetStatus",
    "DaemonSetSpec": """selector:LabelSelector template:PodTemplateSpec
        updateStrategy:DaemonSetUpdateStrategy minReadySeconds revisionHistoryLimit""",
    "DaemonSetUpdateStrategy": "type rollingUpdate:RollingUpdate",
    "DaemonSetStatus": """currentNumberScheduled numberMisscheduled desiredNumberScheduled
        numberReady observedGeneration updatedNumberScheduled numberAvailable
        numberUnavailable collisionCount conditions:[WorkloadCondition]""",
    "Job": "...TypeMeta metadata:ObjectMeta spec:JobSpec status:JobStatus",
    "JobSpec": """parallelism completions activeDeadlineSeconds podFailurePolicy:PodFailurePolicy
        successPolicy:SuccessPolicy backoffLimit backoffLimitPerIndex maxFailedIndexes
        selector:LabelSelector manualSelector template:PodTemplateSpec ttlSecondsAfterFinished
        completionMode suspend podReplacementPolicy managedBy""",
    "PodFailurePolicy": "rules:[PodFailurePolicyRule]",
    "PodFailurePolicyRule": """action onExitCodes:PodFailurePolicyOnExitCodesRequirement
        onPodConditions:[PodFailurePolicyOnPodConditionsPattern]""",
    "PodFailurePolicyOnExitCodesRequirement": "containerName operator values",
    "PodFailurePolicyOnPodConditionsPattern": "type status",
    "SuccessPolicy": "rules:[SuccessPolicyRule]",
    "SuccessPolicyRule": "succeededIndexes succeededCount",
    "JobStatus": """conditions:[ProbedCondition] startTime completionTime active succeeded
        failed terminating completedIndexes failedIndexes
        uncountedTerminatedPods:UncountedTerminatedPods ready""",
    "UncountedTerminatedPods": "succeeded failed",
}

SERVICE = {
    "Service": "...TypeMeta metadata:ObjectMeta spec:ServiceSpec status:ServiceStatus",
    "ServiceSpec": """ports:[ServicePort] selector:{} clusterIP clusterIPs type externalIPs
        sessionAffinity loadBalancerIP loadBalancerSourceRanges externalName
        externalTrafficPolicy healthCheckNodePort publishNotReadyAddresses
        sessionAffinityConfig:SessionAffinityConfig ipFamilies ipFamilyPolicy
        allocateLoadBalancerNodePorts loadBalancerClass internalTrafficPolicy
        trafficDistribution""",
    "ServicePort": "name protocol appProtocol port targetPort nodePort",
    "SessionAffinityConfig": "clientIP:ClientIPConfig",
    "ClientIPConfig": "timeoutSeconds",
    "ServiceStatus": "loadBalancer:LoadBalancerStatus conditions:[Condition]",
    "LoadBalancerStatus": "ingress:[LoadBalancerIngress]",
    "LoadBalancerIngress": "ip hostname ipMode ports:[PortStatus]",
    "PortStatus": "port protocol error",
}

TYPES: dict[str, str] = {
    **META,
    **POD,
    **CONTAINER,
    **VOLUMES,
    **SCHEDULING,
    **NODE,
    **WORKLOADS,
    **SERVICE,
}

# Roots of kinds whose other apiVersion has another shape: root type -> (kind, apiVersion).
VERSIONED: dict[str, tuple[str, str]] = {
    "WorkloadV1alpha2": ("Workload", "scheduling.k8s.io/v1alpha2"),
    "PodGroupV1alpha2": ("PodGroup", "scheduling.k8s.io/v1alpha2"),
    "WorkloadV1beta1": ("Workload", "scheduling.k8s.io/v1beta1"),
    "PodGroupV1beta1": ("PodGroup", "scheduling.k8s.io/v1beta1"),
}
ROOT_OF_VERSION = {version: root for root, version in VERSIONED.items()}

# kind -> apiVersion as published; the kind's own type is its root.
KINDS: dict[str, str] = {
    "Pod": "v1",
    "Node": "v1",
    "Service": "v1",
    "PodDisruptionBudget": "policy/v1",
    "PriorityClass": "scheduling.k8s.io/v1",
    "Deployment": "apps/v1",
    "ReplicaSet": "apps/v1",
    "ReplicationController": "v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Job": "batch/v1",
    "PodGroup": "scheduling.x-k8s.io/v1alpha1",
    "Workload": "scheduling.k8s.io/v1alpha1",
}
