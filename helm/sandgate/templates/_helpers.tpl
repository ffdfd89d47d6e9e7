{{/* Names, labels and settings shared by every template. */}}

{{- define "sandgate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sandgate.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: call with (dict "ctx" $ "component" "gateway"). */}}
{{- define "sandgate.selectorLabels" -}}
app.kubernetes.io/name: {{ .ctx.Chart.Name }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "sandgate.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "sandgate.sandboxNamespace" -}}
{{- default .Release.Namespace .Values.sandbox.namespace -}}
{{- end -}}

{{- define "sandgate.workerServiceAccount" -}}
{{- default (printf "%s-worker" (include "sandgate.fullname" .)) .Values.serviceAccount.worker -}}
{{- end -}}

{{- define "sandgate.gatewayServiceAccount" -}}
{{- default (printf "%s-gateway" (include "sandgate.fullname" .)) .Values.serviceAccount.gateway -}}
{{- end -}}

{{/* The gateway's in-cluster URL: where stage and harvest containers fetch and upload files. */}}
{{- define "sandgate.gatewayUrl" -}}
{{- $port := int .Values.gateway.service.port -}}
{{- printf "http://%s-gateway.%s.svc:%d" (include "sandgate.fullname" .) .Release.Namespace $port -}}
{{- end -}}

{{- define "sandgate.secretName" -}}
{{- default (printf "%s-secrets" (include "sandgate.fullname" .)) .Values.auth.existingSecret -}}
{{- end -}}

{{- define "sandgate.redisSecretName" -}}
{{- default (include "sandgate.secretName" .) .Values.redis.existingSecret -}}
{{- end -}}

{{/* The restricted Pod Security profile every sandgate container runs with. */}}
{{- define "sandgate.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 1000
runAsGroup: 1000
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Environment both gateway and worker read: the ConfigMap, then the Secrets. */}}
{{- define "sandgate.envFrom" -}}
- configMapRef:
    name: {{ include "sandgate.fullname" . }}-config
{{- end -}}

{{- define "sandgate.secretEnv" -}}
- name: REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "sandgate.redisSecretName" . }}
      key: REDIS_URL
{{- if .Values.redis.sentinels }}
- name: SANDGATE_REDIS_SENTINEL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "sandgate.redisSecretName" . }}
      key: SANDGATE_REDIS_SENTINEL_PASSWORD
      optional: true
{{- end }}
- name: SANDGATE_API_KEYS
  valueFrom:
    secretKeyRef:
      name: {{ include "sandgate.secretName" . }}
      key: SANDGATE_API_KEYS
      optional: true
- name: SANDGATE_SIGNING_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "sandgate.secretName" . }}
      key: SANDGATE_SIGNING_KEY
      optional: true
{{- end -}}

{{/* The session-files volume: the shared claim, or (one gateway replica only) an emptyDir. */}}
{{- define "sandgate.dataVolume" -}}
- name: data
{{- if .Values.persistence.enabled }}
  persistentVolumeClaim:
    claimName: {{ default (printf "%s-data" (include "sandgate.fullname" .)) .Values.persistence.existingClaim }}
{{- else }}
  emptyDir: {}
{{- end }}
- name: tmp
  emptyDir:
    sizeLimit: 1Gi
{{- end -}}
