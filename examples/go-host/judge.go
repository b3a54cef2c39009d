package main

import (
	"context"
	"os"

	lockwarden "github.com/lockwarden/lockwarden/hosts/go"
)

// judge asks the policy in policyFile about every lock of the repository
// restic reaches, answering its questions about holders from pods.
func judge(ctx context.Context, policyFile string, restic lockwarden.Restic, pods lockwarden.Liveness, location string) (lockwarden.Result, error) {
	component, err := os.ReadFile(policyFile)
	if err != nil {
		return lockwarden.Result{}, err
	}
	policy, err := lockwarden.Load(ctx, component, lockwarden.Options{Name: policyFile})
	if err != nil {
		return lockwarden.Result{}, err
	}
	defer policy.Close(ctx)
	request, err := lockwarden.RequestFromRestic(restic, location, "local", nil)
	if err != nil {
		return lockwarden.Result{}, err
	}
	caps := lockwarden.Capabilities{Clock: lockwarden.SystemClock{}, Liveness: pods}
	return policy.Evaluate(ctx, caps, request)
}
