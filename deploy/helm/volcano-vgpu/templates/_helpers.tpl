{{/* Labels of every object (selectors use the upstream `name` label only). */}}
{{- define "vgpu.labels" -}}
app.kubernetes.io/name: volcano-vgpu-device-plugin
app.kubernetes.io/part-of: vgpu
{{- end -}}

{{/* The image reference: repository@digest, or repository:tag (tag defaults to appVersion). */}}
{{- define "vgpu.image" -}}
{{- $i := .Values.image -}}
{{- if $i.digest -}}
{{ $i.repository }}@{{ $i.digest }}
{{- else -}}
{{ $i.repository }}:{{ $i.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* Whether a CDI device-list strategy is selected. */}}
{{- define "vgpu.cdi" -}}
{{- if contains "cdi" .Values.plugin.deviceListStrategy }}true{{ end -}}
{{- end -}}

{{/* The ServiceAccount user name of the plugin (the admission policy's writers). */}}
{{- define "vgpu.pluginUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:volcano-device-plugin
{{- end -}}
