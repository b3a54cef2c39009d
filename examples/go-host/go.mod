// What a K8up-style operator does before `restic unlock`: judge a
// repository's locks with a lockwarden policy, in Go, without cgo.
module github.com/lockwarden/lockwarden/examples/go-host

go 1.26.0

require github.com/lockwarden/lockwarden/hosts/go v0.0.0

require (
	github.com/tetratelabs/wazero v1.12.0 // indirect
	golang.org/x/sys v0.44.0 // indirect
)

replace github.com/lockwarden/lockwarden/hosts/go => ../../hosts/go
