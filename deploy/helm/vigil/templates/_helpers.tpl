{{- define "vigil.fullname" -}}
{{- printf "%s" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "vigil.labels" -}}
app.kubernetes.io/name: vigil
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "vigil.selector" -}}
app.kubernetes.io/name: vigil
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
The runtime state directories mounted read-only for the container metadata reader, for the
runtimes enabled in .Values.containerRuntimes (a YAML list of {name, path}). Why each one:
deploy/README.md, "What the agent reads from the node".
*/}}
{{- define "vigil.runtimeMounts" -}}
{{- $r := .Values.containerRuntimes -}}
{{- $m := list -}}
{{- if $r.containerd -}}
{{- $m = append $m (dict "name" "containerd-runc" "path" "/run/containerd/runc") -}}
{{- $m = append $m (dict "name" "containerd-cri" "path" "/var/lib/containerd/io.containerd.grpc.v1.cri/containers") -}}
{{- $m = append $m (dict "name" "containerd-meta" "path" "/var/lib/containerd/io.containerd.metadata.v1.bolt") -}}
{{- end -}}
{{- if $r.crio -}}
{{- $m = append $m (dict "name" "runc" "path" "/run/runc") -}}
{{- end -}}
{{- if $r.docker -}}
{{- $m = append $m (dict "name" "docker-containers" "path" "/var/lib/docker/containers") -}}
{{- $m = append $m (dict "name" "docker-image" "path" "/var/lib/docker/image") -}}
{{- $m = append $m (dict "name" "docker-runc" "path" "/run/docker/runtime-runc") -}}
{{- if not $r.containerd -}}
{{- $m = append $m (dict "name" "containerd-runc-moby" "path" "/run/containerd/runc/moby") -}}
{{- end -}}
{{- end -}}
{{- toYaml $m -}}
{{- end -}}
