// Command kube-apiserver is the upstream API server, started the way its own
// cmd/kube-apiserver starts it, for the end-to-end tests.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
