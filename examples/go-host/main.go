// Command go-host does what a K8up-style operator would do before `restic
// unlock`: it reads a repository's locks through restic, answers the
// policy's questions about their holders from a pod list, and prints the
// policy's verdicts as JSON.
//
//	go-host -policy policy.wasm -pods pods.json -r /srv/restic -p password-file
//
// The pod list is [{"name", "started", "state"}], what an operator's pod
// informer holds; a lock whose pod is gone is judged stale.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"time"

	lockwarden "github.com/lockwarden/lockwarden/hosts/go"
)

func main() {
	policy := flag.String("policy", "", "the policy component (.wasm)")
	podsFile := flag.String("pods", "", "the pod list: [{\"name\", \"started\", \"state\"}]")
	repo := flag.String("r", "", "the repository, as restic's -r takes it")
	password := flag.String("p", "", "the repository's password file")
	resticBin := flag.String("restic", "restic", "the restic binary")
	flag.Parse()
	if *policy == "" || *podsFile == "" || *repo == "" || *password == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*policy, *podsFile, *resticBin, *repo, *password); err != nil {
		fmt.Fprintln(os.Stderr, "go-host:", err)
		os.Exit(1)
	}
}

func run(policy, podsFile, resticBin, repo, password string) error {
	pods, err := readPods(podsFile)
	if err != nil {
		return err
	}
	ctx := context.Background()
	res, err := judge(ctx, policy, resticRunner(ctx, resticBin, repo, password), pods, repo)
	if err != nil {
		return err
	}
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	return out.Encode(map[string]any{"verdicts": res.Verdicts.All(), "logs": res.Logs})
}

// resticRunner runs restic on the repository, each run under a minute.
func resticRunner(ctx context.Context, bin, repo, password string) lockwarden.Restic {
	return func(args ...string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"-r", repo, "--password-file", password, "-q"}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("restic %v: %w: %s", args, err, bytes.TrimSpace(stderr.Bytes()))
		}
		return out, nil
	}
}
