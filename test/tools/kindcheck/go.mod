// The module path sits under sigs.k8s.io/kind/pkg/ on purpose: Go's "internal" rule is by import path, so
// this checker may import kind's own config loader (sigs.k8s.io/kind/pkg/internal/apis/config/encoding) and
// validation, exactly what `kind create cluster --config` runs. It is never published.
module sigs.k8s.io/kind/pkg/cohortlabkindcheck

go 1.24

require sigs.k8s.io/kind v0.31.0

require (
	github.com/pkg/errors v0.9.1 // indirect
	go.yaml.in/yaml/v3 v3.0.4 // indirect
)
