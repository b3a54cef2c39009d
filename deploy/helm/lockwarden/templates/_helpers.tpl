{{/* The name of every object of this release. */}}
{{- define "lockwarden.name" -}}
{{- if contains "lockwarden" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-lockwarden" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The labels of every object. */}}
{{- define "lockwarden.labels" -}}
app.kubernetes.io/name: lockwarden
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The pods' selector. */}}
{{- define "lockwarden.selector" -}}
app.kubernetes.io/name: lockwarden
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The service account's subject in a binding. */}}
{{- define "lockwarden.subject" -}}
- kind: ServiceAccount
  name: {{ include "lockwarden.name" . }}
  namespace: {{ .Release.Namespace }}
{{- end -}}

{{/* The image, by digest when one is given. */}}
{{- define "lockwarden.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* The kinds each operator's objects are listed as. */}}
{{- define "lockwarden.operatorKinds" -}}
velero: { group: velero.io, resources: [backuprepositories, backupstoragelocations] }
stash: { group: stash.appscode.com, resources: [repositories] }
kubestash: { group: storage.kubestash.com, resources: [repositories, backupstorages, snapshots] }
k8up: { group: k8up.io, resources: [schedules, backups, checks, prunes, archives, restores] }
volsync: { group: volsync.backube, resources: [replicationsources, replicationdestinations] }
{{- end -}}
