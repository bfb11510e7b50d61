// Command kueuecheck validates Kueue manager Configuration files with Kueue's own loader at the pinned version:
// sigs.k8s.io/kueue/pkg/config.Load — strict decoding (unknown fields are errors) of config.kueue.x-k8s.io/v1beta2,
// defaulting, and Kueue's validation (waitForPodsReady, integrations and their namespace selector, internal cert
// management, …), exactly what the manager runs at start-up with `--config FILE` (cmd/kueue/main.go). The scheme is
// built as the manager builds it; the pod integration is registered by importing its package, the only framework
// the cohort-lab profiles enable.
//
// Usage: kueuecheck FILE...  One JSON object per file on stdout: {"file":…,"ok":true,"config":{…defaulted…}} or
// {"file":…,"ok":false,"error":…}. Exit 0 when every file is valid, 1 otherwise, 2 on usage errors.
// `kueuecheck --version` prints `kueue <version>` (stamped at build time).
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/config"
	_ "sigs.k8s.io/kueue/pkg/controller/jobs/pod"
)

// kueueVersion is set with -ldflags "-X main.kueueVersion=…".
var kueueVersion = "unknown"

type result struct {
	File   string      `json:"file"`
	OK     bool        `json:"ok"`
	Error  string      `json:"error,omitempty"`
	Config interface{} `json:"config,omitempty"`
}

func main() {
	args := os.Args[1:]
	if len(args) == 1 && args[0] == "--version" {
		fmt.Printf("kueue %s\n", kueueVersion)
		return
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: kueuecheck FILE... | --version")
		os.Exit(2)
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kueue.AddToScheme(scheme))
	utilruntime.Must(configapi.AddToScheme(scheme))
	enc := json.NewEncoder(os.Stdout)
	status := 0
	for _, f := range args {
		_, cfg, err := config.Load(scheme, f)
		r := result{File: f, OK: err == nil}
		if err != nil {
			r.Error = err.Error()
			status = 1
		} else {
			r.Config = cfg
		}
		if err := enc.Encode(r); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	os.Exit(status)
}
