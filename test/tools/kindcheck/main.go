// Command kindcheck validates kind cluster configuration files with kind's own code at the pinned version:
// encoding.Parse (apiVersion/kind detection, strict YAML decoding into v1alpha4.Cluster — unknown fields are
// errors —, v1alpha4 defaulting and conversion to the internal config) followed by Cluster.Validate, the same
// two steps `kind create cluster --config FILE` performs before it touches a container runtime
// (sigs.k8s.io/kind/pkg/cluster/internal/create: fixupOptions, then opts.Config.Validate).
//
// Usage: kindcheck FILE...   (or `-` for stdin). Prints one JSON object per file on stdout:
// {"file":…,"ok":true,"name":…,"nodes":[{"role":…,"image":…,"labels":{…},"extraMounts":[…],"extraPortMappings":[…]}]}
// or {"file":…,"ok":false,"error":…}. Exit status 0 when every file is valid, 1 otherwise, 2 on usage errors.
// `kindcheck --version` prints `kind <version>` (the version is stamped at build time).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"sigs.k8s.io/kind/pkg/internal/apis/config"
	"sigs.k8s.io/kind/pkg/internal/apis/config/encoding"
)

// kindVersion is set with -ldflags "-X main.kindVersion=…" to the kind module version in go.mod.
var kindVersion = "unknown"

type mount struct {
	HostPath      string `json:"hostPath"`
	ContainerPath string `json:"containerPath"`
	Readonly      bool   `json:"readOnly"`
	Propagation   string `json:"propagation"`
}

type portMapping struct {
	ContainerPort int32  `json:"containerPort"`
	HostPort      int32  `json:"hostPort"`
	ListenAddress string `json:"listenAddress"`
	Protocol      string `json:"protocol"`
}

type node struct {
	Role              string            `json:"role"`
	Image             string            `json:"image"`
	Labels            map[string]string `json:"labels"`
	ExtraMounts       []mount           `json:"extraMounts"`
	ExtraPortMappings []portMapping     `json:"extraPortMappings"`
}

type result struct {
	File  string `json:"file"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	Name  string `json:"name,omitempty"`
	Nodes []node `json:"nodes,omitempty"`
}

func check(file string) result {
	var raw []byte
	var err error
	if file == "-" {
		raw, err = io.ReadAll(os.Stdin)
	} else {
		raw, err = os.ReadFile(file)
	}
	if err != nil {
		return result{File: file, Error: "read: " + err.Error()}
	}
	cfg, err := encoding.Parse(raw)
	if err != nil {
		return result{File: file, Error: err.Error()}
	}
	if err := cfg.Validate(); err != nil {
		return result{File: file, Error: err.Error()}
	}
	return result{File: file, OK: true, Name: cfg.Name, Nodes: nodes(cfg)}
}

func nodes(cfg *config.Cluster) []node {
	out := make([]node, 0, len(cfg.Nodes))
	for _, n := range cfg.Nodes {
		v := node{Role: string(n.Role), Image: n.Image, Labels: n.Labels}
		for _, m := range n.ExtraMounts {
			v.ExtraMounts = append(v.ExtraMounts, mount{m.HostPath, m.ContainerPath, m.Readonly, string(m.Propagation)})
		}
		for _, p := range n.ExtraPortMappings {
			v.ExtraPortMappings = append(v.ExtraPortMappings, portMapping{p.ContainerPort, p.HostPort, p.ListenAddress, string(p.Protocol)})
		}
		out = append(out, v)
	}
	return out
}

func main() {
	args := os.Args[1:]
	if len(args) == 1 && args[0] == "--version" {
		fmt.Printf("kind %s\n", kindVersion)
		return
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: kindcheck FILE... (- for stdin) | --version")
		os.Exit(2)
	}
	enc := json.NewEncoder(os.Stdout)
	status := 0
	for _, f := range args {
		r := check(f)
		if !r.OK {
			status = 1
		}
		if err := enc.Encode(r); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	os.Exit(status)
}
