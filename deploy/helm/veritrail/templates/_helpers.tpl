{{- define "veritrail.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "veritrail.labels" -}}
app.kubernetes.io/name: veritrail
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.region }}
veritrail.dev/region: {{ . }}
{{- end }}
{{- end -}}

{{- define "veritrail.selector" -}}
app.kubernetes.io/name: veritrail
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .tier }}
{{- end -}}

{{- define "veritrail.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}

{{- define "veritrail.postgresSecret" -}}
{{- .Values.postgres.existingSecret | default (printf "%s-postgres" (include "veritrail.fullname" .)) -}}
{{- end -}}

{{- define "veritrail.bootstrapSecret" -}}
{{- .Values.bootstrap.existingSecret | default (printf "%s-bootstrap" (include "veritrail.fullname" .)) -}}
{{- end -}}

{{/* The environment every veritrail container shares: the region's dependencies. */}}
{{- define "veritrail.env" -}}
- name: VERITRAIL_CONFIG
  value: /etc/veritrail/config.yaml
- name: VERITRAIL_POSTGRES
  valueFrom:
    secretKeyRef:
      name: {{ include "veritrail.postgresSecret" . }}
      key: dsn
- name: VERITRAIL_KAFKA_BROKERS
  value: {{ required "kafka.brokers: this region's Kafka brokers" .Values.kafka.brokers | join "," | quote }}
- name: VERITRAIL_KAFKA_PARTITIONS
  value: {{ .Values.kafka.partitions | quote }}
- name: VERITRAIL_KAFKA_REPLICATION_FACTOR
  value: {{ .Values.kafka.replicationFactor | quote }}
- name: VERITRAIL_BASE_URL
  value: {{ required "baseURL: this region's public URL" .Values.baseURL | quote }}
{{- end -}}

{{/* A consumer's place in its Kafka group: its session timeout and its static member ID, its
pod's name, which a container restarted in its pod keeps, so that it takes its partitions back
at once. */}}
{{- define "veritrail.kafkaConsumer" -}}
- name: VERITRAIL_KAFKA_SESSION_TIMEOUT
  value: {{ .Values.kafka.sessionTimeout | quote }}
{{- if .Values.kafka.staticMembership }}
- name: VERITRAIL_KAFKA_INSTANCE_ID
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end -}}
{{- end -}}

{{- define "veritrail.volumes" -}}
- name: config
  configMap:
    name: {{ include "veritrail.fullname" . }}
- name: tmp
  emptyDir: {}
{{- end -}}

{{- define "veritrail.volumeMounts" -}}
- name: config
  mountPath: /etc/veritrail
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/* Probes on a port: /livez restarts a hung process, /readyz takes one out of traffic. */}}
{{- define "veritrail.probes" -}}
startupProbe:
  httpGet: {path: /livez, port: {{ . }}}
  periodSeconds: 2
  failureThreshold: 60
livenessProbe:
  httpGet: {path: /livez, port: {{ . }}}
  periodSeconds: 10
  failureThreshold: 3
readinessProbe:
  httpGet: {path: /readyz, port: {{ . }}}
  periodSeconds: 5
  failureThreshold: 2
{{- end -}}
